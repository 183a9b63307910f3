"""Every planted defect, how to switch it on, and the cases it must fail (or warn).

One table for the test that runs in `make test` (each defect against a
selection: `cases`, or its `families` less `exclude`) and for `make
conform-defects` (each against its whole suite): both must see exactly
`fails` and `warns` among the cases they run.
docs/conformance.md shows the same table.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tests.conformance.harness import AGENT, CONTROL, NATIVE, NATIVE_DOCTOR, with_flags


@dataclass(frozen=True)
class Planted:
    name: str
    suite: str
    #: How it is switched on, for the table.
    switch: str
    fails: frozenset[str]
    warns: frozenset[str] = frozenset()
    #: The families of the suite the defect can touch (make test runs only these).
    families: tuple[str, ...] = ()
    #: Arguments before `--` (target options) and the command after it.
    args: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    #: Cases of those families left out in make test: long timers (a defect's own
    #: long case is then judged only by `make conform-defects`).
    exclude: tuple[str, ...] = field(default=())
    #: Instead of whole families, only these cases in make test.
    cases: tuple[str, ...] = ()

    def expected(self, ids: frozenset[str]) -> tuple[frozenset[str], frozenset[str]]:
        """(fails, warns) among the cases a make-test selection runs."""
        return self.fails & ids, self.warns & ids


def agent(name: str, fails: set[str], families: tuple[str, ...], *, display: bool = False,
          exclude: tuple[str, ...] = (), flags: tuple[str, ...] = (),
          cases: tuple[str, ...] = (), profile: tuple[str, ...] = ()) -> Planted:  # fmt: skip
    flags = flags or ("--defect", name)
    args = ("--control-command", " ".join(with_flags(CONTROL, *flags)))
    for reading in profile:
        args = (*args, "--profile", reading)
    if display:
        args = ("--xvfb", *args)
    return Planted(
        name, "agent", f"tetherbed agent {' '.join(flags)}", frozenset(fails),
        families=families, args=args, command=tuple(with_flags(AGENT, *flags)), exclude=exclude,
        cases=cases,
    )  # fmt: skip


def hub(name: str, fails: set[str], families: tuple[str, ...], *, warns: set[str] | None = None,
        flag: str | None = None, cases: tuple[str, ...] = ()) -> Planted:  # fmt: skip
    hub_flag = flag or f"--defect={name}"
    return Planted(
        name, "hub", f"tetherbed hub {hub_flag}", frozenset(fails), frozenset(warns or ()),
        families=families, args=(f"--hub-arg={hub_flag}",), cases=cases,
    )  # fmt: skip


def native(name: str, fails: set[str], families: tuple[str, ...], *,
           exclude: tuple[str, ...] = (), cases: tuple[str, ...] = (),
           args: tuple[str, ...] = ()) -> Planted:  # fmt: skip
    return Planted(
        name, "native", f"tetherbed native --defect {name}", frozenset(fails),
        families=families, command=tuple(with_flags(NATIVE, "--defect", name)),
        exclude=exclude, cases=cases, args=args,
    )  # fmt: skip


def dsh_hub(name: str, fails: set[str], families: tuple[str, ...], *,
            cases: tuple[str, ...] = ()) -> Planted:  # fmt: skip
    flag = f"--dsh-defect={name}"
    return Planted(
        name, "dsh-hub", f"tetherbed hub {flag}", frozenset(fails), families=families,
        args=(f"--hub-arg={flag}",), cases=cases,
    )  # fmt: skip


def dsh_agent(name: str, fails: set[str], families: tuple[str, ...], *,
              cases: tuple[str, ...] = ()) -> Planted:  # fmt: skip
    return Planted(
        name, "dsh-agent", f"tetherbed agent --transport sse run --defect {name}",
        frozenset(fails), families=families, args=(f"--run-arg=--defect={name}",), cases=cases,
    )  # fmt: skip


#: Long waits in the agent's families that only a defect of their own can fail.
SLOW_AGENT = ("LE-status-cadence", "LE-reconnect-backoff", "LE-reconnect-backoff-reset")

PLANTED: list[Planted] = []

PLANTED += [
    agent("crlf_read", {"LE-files-read-crlf", "LE-files-write-text"}, ("files",)),
    agent(
        "jail_skips_symlinks",
        {
            "LE-files-stat-symlink",
            "LE-jail-create-parents-symlink",
            "LE-jail-symlink-out-delete",
            "LE-jail-symlink-out-move",
            "LE-jail-symlink-out-read",
            "LE-jail-symlink-out-stat",
            "LE-jail-symlink-out-write",
        },
        ("files", "jail"),
    ),
    agent("leak_environment", {"LE-shell-env-no-leak"}, ("shell",)),
    agent(
        "timeout_kills_shell_only",
        {"LE-shell-timeout", "LE-shell-timeout-kills-group"},
        ("shell",),
        cases=(
            "LE-shell-timeout",
            "LE-shell-timeout-kills-group",
            "LE-shell-timeout-promptness",
            "LE-shell-command",
            "LE-shell-timeout-capped",
        ),
    ),
    agent(
        "raw_window_ids",
        {"LE-cu-windows"},
        ("computer_use",),
        display=True,
        cases=("LE-cu-windows", "LE-cu-display-info", "LE-cu-clipboard"),
    ),
    agent(
        "reconnect_after_4427",
        {"LE-close-4427-no-reconnect", "LE-close-4427-newcomer-no-reconnect"},
        ("connection",),
        exclude=SLOW_AGENT[1:],
    ),
    agent("no_status_edge", {"LE-status-edge"}, ("capacity",), exclude=SLOW_AGENT[:1]),
    agent(
        "ignore_grants",
        {"LE-hello-grants-enforced", "LE-cu-not-granted", "LE-serial-not-negotiated"},
        ("hello", "computer_use"),
        display=True,
        exclude=(
            "LE-cu-screenshot-png",
            "LE-cu-screenshot-jpeg",
            "LE-cu-screenshot-region",
            "LE-cu-screenshot-too-large",
            "LE-cu-clipboard",
            "LE-cu-permissions",
            "LE-cu-windows",
            "LE-cu-input-move",
        ),
    ),
    agent("control_refs_survive_reconnect", {"LE-control-refs-die-on-reconnect"}, ("control",)),
    agent(
        "ignore_fatal_close",
        {
            "LE-close-4427-newcomer-no-reconnect",
            "LE-close-4427-no-reconnect",
            "LE-close-4428-no-reconnect",
            "LE-close-4429-no-reconnect-while-down",
            "LE-control-ack-checked",
            "LE-revoked-no-reconnect",
            "LE-revoked-unknown-reason",
            "LE-version-4426-no-reconnect",
        },
        ("connection", "control", "hello"),
        cases=(
            "LE-close-4427-newcomer-no-reconnect",
            "LE-close-4427-no-reconnect",
            "LE-close-4428-no-reconnect",
            "LE-close-4429-no-reconnect-while-down",
            "LE-control-ack-checked",
            "LE-revoked-no-reconnect",
            "LE-revoked-unknown-reason",
            "LE-version-4426-no-reconnect",
            "LE-close-1011-reconnect",
            "LE-revoked-closes",
            "LE-control-hello",
        ),
    ),
    agent(
        "reconnect_immediately",
        {
            "LE-close-1000-reconnect",
            "LE-close-1011-reconnect",
            "LE-close-ping-timeout-reconnect",
            "LE-reconnect-backoff",
        },
        ("connection",),
        exclude=SLOW_AGENT[2:],
    ),
    agent(
        "lose_writes",
        {
            "LE-files-move-cross-device",
            "LE-files-write-base64",
            "LE-files-write-create-parents",
            "LE-files-write-missing-parent",
            "LE-files-write-overwrite",
            "LE-files-write-text",
            "LE-files-write-too-large",
            "LE-jail-create-parents-outside",
            "LE-jail-create-parents-symlink",
            "LE-jail-long-name",
            "LE-jail-symlink-out-write",
        },
        ("files", "jail"),
    ),
]

PLANTED += [
    agent(
        "llm_chunk_finish_reason",
        {"LE-llm-chunk-finish-reason", "LE-llm-failed-midstream"},
        ("local_llm",),
        cases=(
            "LE-llm-chunk-finish-reason",
            "LE-llm-failed-midstream",
            "LE-llm-response-assembled",
            "LE-llm-no-stream",
        ),
    ),
    agent(
        "llm_busy_unenforced",
        {"LE-llm-busy"},
        ("local_llm",),
        cases=("LE-llm-busy", "LE-llm-stream-chunks", "LE-llm-failed"),
    ),
    agent(
        "serial_without_negotiation",
        {"LE-serial-not-negotiated"},
        ("serial_io",),
        cases=(
            "LE-serial-not-negotiated",
            "LE-serial-round-trip",
            "LE-serial-offered-with-hardware",
        ),
    ),
    # Refusing device names off Windows is one reading of PATH_RESERVED_NAME:
    # the defect fails under `--profile reserved-names=every-os` (the default
    # `either` accepts both behaviours).
    agent(
        "accept_reserved_names",
        {"LE-files-reserved-name-write", "LE-files-reserved-name-move"},
        ("reserved_names",),
        profile=("reserved-names=every-os",),
    ),
]

PLANTED += [
    hub("grant_unadvertised", {"LE-hub-ack-granted-subset"}, ("handshake",)),
    hub(
        "no_ping",
        {"LE-hub-ping-cadence", "LE-hub-ping-format", "LE-hub-pong-missed-drop"},
        ("keepalive", "requests"),
    ),
    hub("ignore_capacity", set(), ("requests",), warns={"LE-hub-capacity-aware"}),
    hub(
        "agent_auth_skipped",
        {"LE-hub-auth-required"},
        ("tenancy", "ownership"),
        warns={"LE-hub-revoke-reconnect-refused"},
    ),
    hub("retry_non_idempotent", {"LE-hub-retry-non-idempotent"}, ("retry",)),
    hub(
        "orphan_on_disconnect",
        {"LE-hub-answer-agent-drops", "LE-hub-retry-answered-once"},
        ("requests", "retry"),
    ),
    hub("shared_ids", {"LE-hub-ids-not-crossed"}, ("requests",)),
    hub("llm_without_models", {"LE-hub-llm-unavailable"}, ("local_llm",)),
    # A relay-performance defect the spec has no rule for: it fails no case
    # (the simulator's head-of-line scenario catches it).
    hub("head_of_line", set(), ("requests",)),
    hub(
        "last-write-wins",
        {"LE-own-4427-different-machine", "LE-own-4427-same-machine"},
        ("ownership",),
        flag="--ownership=last-write-wins",
        cases=(
            "LE-own-4427-different-machine",
            "LE-own-4427-same-machine",
            "LE-own-explicit-disconnect-releases",
        ),
    ),
    # The other reading of 4427: a failure under the default profile only
    # (under `--profile ownership-4427=evict-old` every case passes).
    hub(
        "evict-old",
        {"LE-own-4427-different-machine"},
        ("ownership",),
        flag="--ownership=evict-old",
        cases=(
            "LE-own-4427-different-machine",
            "LE-own-4427-same-machine",
            "LE-own-explicit-disconnect-releases",
        ),
    ),
]

PLANTED += [
    native(
        "accept_unknown_fields",
        {"CD-envelope-unknown-field", "CD-action-arguments", "CD-preview-image"},
        ("envelope", "methods"),
        cases=(
            "CD-envelope-unknown-field",
            "CD-action-arguments",
            "CD-preview-image",
            "CD-envelope-hello",
            "CD-connect-arguments",
        ),
    ),
    native(
        "max_edge_unchecked",
        {"CD-screenshot-arguments"},
        ("methods",),
        cases=("CD-screenshot-arguments", "CD-screenshot-image", "CD-preview-image"),
    ),
    native("operation_cache_ignores_arguments", {"CD-ops-conflict"}, ("operations",)),
    native(
        "observations_survive_generation",
        {"CD-obs-generation-change", "CD-obs-expiry"},
        ("observations",),
        exclude=("CD-obs-expiry", "CD-obs-retain-32"),
    ),
    native("blocked_pipe_never_exits", {"CD-output-blocked-pipe"}, ("output",)),
    native(
        "doctor_pipe_only",
        {"CD-doctor-json", "CD-doctor-hello-agree"},
        ("doctor",),
        args=(
            "--doctor-command",
            " ".join([*NATIVE_DOCTOR, "--defect", "doctor_pipe_only"]),
        ),
    ),
    native(
        "ticket_reusable",
        {"CD-video-ticket-once"},
        ("video",),
        cases=(
            "CD-video-ticket",
            "CD-video-ticket-wrong",
            "CD-video-ticket-once",
            "CD-video-ticket-first-message",
            "CD-video-open-result",
        ),
    ),
]

PLANTED += [
    # Not a defect switch but the profile that imitates the public reference
    # shim, which drops without an answer a frame its strict models refuse.
    agent(
        "strict-wire",
        {
            "LE-envelope-unknown-payload-field",
            "LE-envelope-unknown-envelope-field",
            "LE-envelope-mistyped-field",
            "LE-envelope-unknown-type",
        },
        ("envelope",),
        flags=("--strict-wire",),
    ),
]

PLANTED += [
    dsh_hub(
        "reusable_key",
        {"DSH-enroll-key-single-use", "DSH-keys-one-pending"},
        ("enrollment",),
        cases=(
            "DSH-enroll-key-single-use",
            "DSH-keys-one-pending",
            "DSH-enroll-answer",
            "DSH-key-status",
        ),
    ),
    dsh_hub(
        "token_in_clear",
        {"DSH-auth-token-at-rest"},
        ("auth",),
        cases=("DSH-auth-token-at-rest", "DSH-auth-bearer-required", "DSH-events-hello"),
    ),
    dsh_hub(
        "presence_from_heartbeat",
        {"DSH-presence-stream"},
        ("presence",),
        cases=("DSH-presence-stream", "DSH-presence-health", "DSH-delete-kicks"),
    ),
    dsh_hub(
        "chunks_out_of_order",
        {"DSH-chunks-in-order"},
        ("exec",),
        cases=("DSH-chunks-in-order", "DSH-exec-dispatch"),
    ),
    dsh_hub(
        "install_url_from_forwarded_header",
        {"DSH-install-url-forwarded"},
        ("install",),
        cases=("DSH-install-url-forwarded", "DSH-join-sh", "DSH-keys-answer"),
    ),
    dsh_agent(
        "ignore_cancel",
        {"DSH-agent-cancel"},
        ("exec",),
        cases=("DSH-agent-cancel", "DSH-agent-exec-timeout"),
    ),
    dsh_agent(
        "constant_seq",
        {"DSH-agent-chunks-seq"},
        ("exec",),
        cases=("DSH-agent-chunks-seq", "DSH-agent-no-stream-old-host"),
    ),
    dsh_agent(
        "seq_from_one",
        {"DSH-agent-chunks-seq"},
        ("exec",),
        cases=("DSH-agent-chunks-seq", "DSH-agent-exec-result"),
    ),
    dsh_agent(
        "reconnect_immediately",
        {"DSH-agent-reconnect-backoff"},
        ("stream",),
        cases=("DSH-agent-reconnect-backoff", "DSH-agent-reconnect-after-end"),
    ),
]

#: The make-test selection of a defect that has none of its own: the cases it
#: must fail or warn and, beside them, cases it must leave passing.
NEIGHBOURS: dict[str, tuple[str, ...]] = {
    "crlf_read": ("LE-files-read-text", "LE-files-read-base64"),
    "jail_skips_symlinks": ("LE-jail-dotdot", "LE-jail-absolute-elsewhere", "LE-files-stat-file"),
    "leak_environment": ("LE-shell-env-merge", "LE-shell-env-baseline"),
    "reconnect_after_4427": ("LE-close-4428-no-reconnect", "LE-close-1011-reconnect"),
    "ignore_grants": ("LE-hello-shell-opt-in", "LE-cu-screenshot-png"),
    "control_refs_survive_reconnect": ("LE-control-browse-start", "LE-control-attach"),
    "lose_writes": ("LE-files-read-text", "LE-files-delete"),
    "grant_unadvertised": ("LE-hub-ack-same-id", "LE-hub-ack-control"),
    "no_ping": ("LE-hub-answer-agent-stalled", "LE-hub-pong-kept"),
    "ignore_capacity": ("LE-hub-relay-pipelined",),
    "agent_auth_skipped": ("LE-hub-tenant-client",),
    "retry_non_idempotent": ("LE-hub-retry-delete-missing-ok",),
    "orphan_on_disconnect": ("LE-hub-relay-same-id", "LE-hub-answer-no-agent"),
    "shared_ids": ("LE-hub-relay-same-id", "LE-hub-relay-pipelined"),
    "head_of_line": ("LE-hub-relay-same-id", "LE-hub-relay-pipelined", "LE-hub-ids-not-crossed"),
}
PLANTED = [
    replace(p, cases=tuple(sorted(p.fails | p.warns)) + NEIGHBOURS[p.name], exclude=())
    if p.name in NEIGHBOURS and not p.cases
    else p
    for p in PLANTED
]
