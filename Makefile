# Two entry points a fresh machine needs: `make demo` and `make test` (see README).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SYSTEM_PACKAGES := mmdebstrap slurm-client slurmd shellcheck mariadb-server tmux nftables iproute2
SLURM_ROOT_CACHE := .cache/slurm-rootfs

.PHONY: demo test test-fast venv system-packages slurm-root lint bench snapshot mutation

$(BIN)/clusterprint: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

venv: $(BIN)/clusterprint

# The main job, offline, on blueprints/a3mega.yaml (the stack has no default): check it,
# render what its nodes run, and list what `pulumi up` would create.
demo: venv
	$(BIN)/clusterprint validate blueprints/a3mega.yaml
	$(BIN)/clusterprint render blueprints/a3mega.yaml --out out/a3mega --force
	$(BIN)/clusterprint plan blueprints/a3mega.yaml

# mmdebstrap for the Slurm root below and MariaDB (slurmdbd's database) for the tests that
# prove rendered files on real daemons; Debian 12's slurm-client and slurmd (Slurm 22.05) only
# as the oracle of tests/clusterprint/node/test_config_sync.py (`scontrol -V`, `slurmd -G`), a
# unit test, which runs as any user and so cannot enter the Slurm root; shellcheck for the rendered scripts, tmux for the test
# that drives `clusterprint new` in a real terminal, and nftables and iproute2 for the metadata
# guard's proof and the health check's nodes in network namespaces of their own (Debian
# packages).
system-packages:
	@missing=""; for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	fi

# The root file system the real-daemon tests run Slurm 26.05 and munge from (Debian unstable,
# ~30 s and ~200 MB), in $(SLURM_ROOT_CACHE); kept until its recipe changes (the script keeps
# its own hash in a stamp file). See tests/support/slurm_root.py.
slurm-root: system-packages
	tests/support/build_slurm_root.sh $(SLURM_ROOT_CACHE)

lint: venv
	$(BIN)/ruff check --no-cache .

# The whole suite, every tier, in parallel: one pytest-xdist worker per core (TEST_JOBS=1 for
# one process); --dist loadgroup keeps the tests that share something on one worker (see
# tests/conftest.py). Root, for the sandbox and Slurm tiers.
TEST_JOBS ?= auto

test: system-packages slurm-root venv lint
	$(BIN)/pytest -q -n $(TEST_JOBS) --dist loadgroup

# Lint and the unit tier only: no daemons, no namespaces, no Pulumi mocks, no apt and no root
# (any user who can read the checkout and its venv; see docs/development.md), in under two
# minutes.
test-fast: venv lint
	$(BIN)/pytest -q -m unit -n $(TEST_JOBS) --dist loadgroup

bench: venv
	$(BIN)/python tests/benchmarks/bench_cli.py
	$(BIN)/python tests/benchmarks/bench_plan.py
	$(BIN)/python tests/benchmarks/bench_healthcheck.py
	$(BIN)/python tests/benchmarks/bench_remediation.py
	$(BIN)/python tests/benchmarks/bench_capacity.py
	$(BIN)/python tests/benchmarks/bench_boot.py

# Every CLI output and rendered file of the reference blueprints, into the new folder SNAPSHOT:
# for a change that should change no behaviour, `make snapshot SNAPSHOT=/tmp/before` first,
# `make snapshot SNAPSHOT=/tmp/after` after, and `diff -r /tmp/before /tmp/after` is empty.
snapshot: venv
	@test -n "$(SNAPSHOT)" || { echo "usage: make snapshot SNAPSHOT=DIR (a new folder)" >&2; exit 2; }
	CLUSTERPRINT=$(BIN)/clusterprint tests/snapshot.sh $(SNAPSHOT)

# Mutation testing (slow, not in CI): mutmut, pinned in pyproject's `mutation` extra, in a venv
# of its own. MUTATION_SCOPE (mutation/scope.py: node, the default, policies or core, the scope
# [tool.mutmut] in pyproject.toml states) picks what is mutated and the tests that judge it;
# the tree is staged in .mutation/SCOPE/ (mutmut reads its configuration where it runs) and each
# mutant runs against the tests that reach it. The kill rate per module and every surviving
# mutant go to mutation/REPORT-SCOPE.md. MUTATION_JOBS=1 on a busy machine;
# MUTANTS='clusterprint.node.remediate.*' runs only the mutants whose names match.
MUTATION_VENV := .venv-mutation
MUTATION_JOBS ?= 2
MUTATION_SCOPE ?= node
MUTANTS ?=
MUTATION_DIR := .mutation/$(MUTATION_SCOPE)
MUTATION_REPORT := mutation/REPORT-$(MUTATION_SCOPE).md

$(MUTATION_VENV)/bin/mutmut: pyproject.toml
	$(PYTHON) -m venv $(MUTATION_VENV)
	$(MUTATION_VENV)/bin/pip install -q --upgrade pip
	$(MUTATION_VENV)/bin/pip install -q -e '.[test,mutation]'
	touch $@

mutation: system-packages $(MUTATION_VENV)/bin/mutmut
	rm -rf $(MUTATION_DIR) && mkdir -p $(MUTATION_DIR)/mutation/pristine
	git ls-files -z | xargs -0 cp --parents -t $(MUTATION_DIR)
	cp -r clusterprint/node $(MUTATION_DIR)/mutation/pristine/
	$(MUTATION_VENV)/bin/python mutation/scope.py $(MUTATION_SCOPE) $(MUTATION_DIR)/pyproject.toml
	cd $(MUTATION_DIR) && start=$$(date +%s) && \
	nice -n 10 $(CURDIR)/$(MUTATION_VENV)/bin/mutmut run --max-children $(MUTATION_JOBS) $(MUTANTS) && \
	MUTATION_SECONDS=$$(($$(date +%s) - start)) MUTANTS='$(MUTANTS)' \
	MUTATION_COMMIT=$$(git -C $(CURDIR) rev-parse --short HEAD) \
		$(CURDIR)/$(MUTATION_VENV)/bin/python mutation/report.py \
		$(CURDIR)/$(MUTATION_VENV)/bin/mutmut > $(CURDIR)/$(MUTATION_REPORT)
	@sed -n '/^Kill rate/p' $(MUTATION_REPORT)
