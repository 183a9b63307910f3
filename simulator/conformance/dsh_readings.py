"""The dsh-computers spec's own ambiguities, as profiles both dsh suites read.

Each is recorded in docs/spec-notes.md ("dsh-computers: judging other
implementations"):

- `key-used-when`: §2/§3.1 consume an enrollment key at enroll; §11.6.4 keeps
  it pending until the agent's first successful stream.
- `capability-field`: §11.1 puts `capabilities` at the top of the enroll and
  heartbeat bodies; §11.6.1 puts them in an unnamed metadata block.
- `timeout-outcome`: §5.2 makes a timed-out `computer_exec` an error (and
  §5.2's abort sends `cancel`); §11.6.3 promotes it to a background job and
  kills nothing.
- `install-url-source`: §4.2 builds the install command's URL from
  `X-Forwarded-*`, `Forwarded` and `Host`, which any client can set; the
  command ends in `curl … | sh`.
"""

from __future__ import annotations

from tetherbed.simulator.conformance.profiles import Ambiguity, declare

NOTES = "docs/spec-notes.md, dsh-computers: judging other implementations"

KEY_USED_WHEN = declare(
    Ambiguity(
        name="key-used-when",
        suites=("dsh-hub",),
        question="§3.1 consumes an enrollment key at enroll; §11.6.4 marks it used at the "
        "agent's first successful stream.",
        readings={
            "either": "a key that enrolled a machine whose stream then opened is refused "
            "(409 key-used); before that stream either answer is accepted",
            "enroll": "a key is refused (409 key-used) as soon as it enrolled a machine",
            "first-stream": "a key is refused (409 key-used) once its machine's stream opened",
        },
        default="either",
        notes=NOTES,
    )
)

CAPABILITY_FIELD = declare(
    Ambiguity(
        name="capability-field",
        suites=("dsh-agent", "dsh-hub"),
        question="§11.1 names a top-level `capabilities` field of enroll and heartbeat; "
        "§11.6.1 puts `capabilities` in a metadata block without naming its field.",
        readings={
            "either": "the agent reports them at the top level or in `metadata`; the hub "
            "reads both places (the raw agent sends both)",
            "top-level": "top-level `capabilities` (§11.1)",
            "metadata": "`metadata.capabilities` (§11.6.1)",
        },
        default="either",
        notes=NOTES,
    )
)

TIMEOUT_OUTCOME = declare(
    Ambiguity(
        name="timeout-outcome",
        suites=("dsh-hub",),
        question="§5.2: a timeout throws an error; §11.6.3: a foreground computer_exec that "
        "reaches timeoutMs is promoted to a background job and not killed.",
        readings={
            "either": "a promoted job without `cancel`, or an error with `cancel` sent",
            "promote": "§11.6.3: `{jobId, promoted: true}` and no `cancel`",
            "cancel": "v1: an error, and `cancel` sent to the agent",
        },
        default="either",
        notes=NOTES,
    )
)

INSTALL_URL_SOURCE = declare(
    Ambiguity(
        name="install-url-source",
        suites=("dsh-hub",),
        question="§4.2 resolves the install command's server URL from X-Forwarded-*, "
        "Forwarded and Host, which any client can send; the command is `curl … | sh`.",
        readings={
            "request-only": "no request header a client sends reaches the install URL",
            "forwarded": "§4.2's order: a clean forwarded authority may be used, a malformed "
            "one (a quote, a space, a path) never",
        },
        default="request-only",
        notes=NOTES,
    )
)
