# Two commands set everything up: `make demo` and `make test`. Each installs what
# it needs first (Debian packages when missing, then the .venv) and is idempotent.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# xvfb, x11-utils, xdotool: real displays; socat: virtual serial ports; ffmpeg:
# checking video; scrot, imagemagick: the screenshot baseline; chromium: running
# the timeline report's script; debootstrap: the registry-free image build;
# libtk8.6: the probe desktop app (Tk); openssl: throwaway certificates for wss:// targets.
DEBIAN_PACKAGES := xvfb socat xdotool x11-utils ffmpeg scrot imagemagick chromium debootstrap libtk8.6 openssl
# How many pytest-xdist workers; the machines this runs on have two cores.
WORKERS ?= auto

.PHONY: demo test lint system-deps venv bench load fuzz clean images dsh-defects conform-defects explore

demo: venv
	$(PY) -m tetherbed demo

test: venv system-deps
	$(VENV)/bin/ruff check .
	TESTCONTAINERS_RYUK_DISABLED=true $(PY) -m pytest -n $(WORKERS) --dist loadgroup $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: venv system-deps
	$(PY) bench/relay.py
	$(PY) bench/screenshot.py
	$(PY) bench/video.py
	$(PY) bench/idle_agents.py

# The long load profiles whose figures docs/load.md quotes (several minutes;
# reports in load-results/). `make test` runs only their short smoke runs.
LOAD := $(PY) -m tetherbed load
load: venv system-deps
	$(LOAD) relay --step --users 64 --agents 16 --steps 8 --step-seconds 10 --out load-results/relay
	$(LOAD) storm --users 1000 --out load-results/storm
	$(LOAD) storm --users 5000 --spawn-rate 250 --drop none --out load-results/storm-5000-idle
	$(LOAD) takeover --duration 60 --out load-results/takeover
	$(LOAD) video --users 4 --slow 1 --phase-seconds 15 --out load-results/video

# The long fuzzing profile (docs/fuzzing.md): many live examples against each of the
# three targets (reports and failing cases in fuzz-results/), then the properties of
# tests/fuzz under the same profile. `make test` runs a bounded profile of each.
FUZZ := TETHERBED_FUZZ_PROFILE=long $(PY) -m tetherbed fuzz
fuzz: venv system-deps
	$(FUZZ) native --report fuzz-results
	$(FUZZ) hub --report fuzz-results
	$(FUZZ) agent --report fuzz-results
	TETHERBED_FUZZ_PROFILE=long $(PY) -m pytest -n 2 tests/fuzz --ignore-glob='tests/fuzz/test_live_*'

# The dsh hub's planted defects in the shipped dsh scenarios, on sim and on real
# processes (`make test` runs the sim half).
dsh-defects: venv
	TETHERBED_DSH_DEFECT_BACKENDS=sim,process $(PY) -m pytest -n 2 tests/unit/simulator/test_dsh_defects.py

# Every planted defect against its whole conformance suite (long; `make test`
# runs each against the cases it must fail and some neighbours).
conform-defects: venv system-deps
	$(PY) -m tests.conformance.full_defects

# Long exploration sweeps (docs/explore.md): 200 seeds of each example on sim,
# then each planted hub defect found, shrunk and exported under explore-results/.
EXPLORE := $(VENV)/bin/tetherbed explore
explore: venv
	mkdir -p explore-results
	-$(EXPLORE) scenarios/explore/two_machines.yaml --seeds 200 --no-shrink
	-$(EXPLORE) scenarios/explore/takeover_race.yaml --seeds 200 --no-shrink
	-$(EXPLORE) scenarios/explore/one_agent.yaml --seeds 200 --no-shrink
	-$(EXPLORE) scenarios/explore/takeover_race.yaml --seeds 200 --hub-defect evict_after_drain --export explore-results/evict_after_drain.yaml
	-$(EXPLORE) scenarios/explore/one_agent.yaml --seeds 200 --stop-at-first --hub-defect no_request_deadline --export explore-results/no_request_deadline.yaml
	-$(EXPLORE) scenarios/explore/one_agent.yaml --seeds 200 --stop-at-first --hub-defect revocation_unenforced --export explore-results/revocation_unenforced.yaml
	-$(EXPLORE) scenarios/explore/takeover_race.yaml --seeds 200 --stop-at-first --hub-defect takeover_unlabelled --export explore-results/takeover_unlabelled.yaml
	-$(EXPLORE) scenarios/explore/one_agent.yaml --seeds 200 --stop-at-first --hub-defect reissue_unlabelled --export explore-results/reissue_unlabelled.yaml

# Registry-free Docker images (compose/README.md); a warm tree builds nothing.
images: venv
	$(PY) compose/build_images.py

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

# Installs the Debian packages that are missing; a no-op when all are present.
system-deps:
	@missing=$$(for p in $(DEBIAN_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:" $$missing; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
