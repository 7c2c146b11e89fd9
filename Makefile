# The verbs a newcomer types. Everything installs what it needs into .venv and .cache/.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
UV_VERSION := 0.13.9
CACHE := .cache
STAMP := $(VENV)/.installed
SOURCES := obsingest obsingest_cli obsingest_testing producers functions beam_jobs schemas infra benchmarks tests

.PHONY: help setup system-deps demo test test-unit test-integration test-e2e test-tools lint bench lock stack-up stack-down stack-status prism function-zip clean

help: ## list the verbs
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

system-deps: ## Debian packages the pipeline uses (fpack/funpack reference, PostgreSQL, Java for Kafka)
	@bash infra/local/system-deps.sh

# Byte-compiled at install (--compile-bytecode, compileall), as the images are: uv installs
# without .pyc, and with PYTHONDONTWRITEBYTECODE set (as in CI's shell) every process would compile
# astropy, SQLAlchemy and daf_butler from source on each start, ~2.5x the CPU of a cached import.
$(STAMP): pyproject.toml requirements.lock producers/compress/_rice.c Makefile
	@bash infra/local/system-deps.sh
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)
	@$(VENV)/bin/uv pip sync -q --compile-bytecode --python $(PY) requirements.lock
	@# compat mode: a plain .pth path entry; the default import-hook finder costs ~80 ms per start
	@$(VENV)/bin/uv pip install -q --compile-bytecode --python $(PY) --no-deps -C editable_mode=compat -e ".[butler]"
	@$(PY) -m compileall -q -j 0 $(SOURCES) >/dev/null
	@touch $(STAMP)

setup: $(STAMP) ## create the project virtualenv with pinned dependencies

demo: $(STAMP) ## run the whole pipeline on embedded defaults (3 exposures x 9 CCDs)
	$(VENV)/bin/obsingest demo

test: $(STAMP) ## every test: unit, integration on the real local services, end-to-end (images build meanwhile); then test-containers
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	@bash infra/containers/make-test.sh $(PY)

test-unit: $(STAMP) ## unit tests only, no services, seconds
	$(PY) -m pytest -m unit tests/unit

test-integration: $(STAMP) ## integration tests against the real local services
	$(PY) -m pytest -m "integration and not containers" tests/integration

test-e2e: $(STAMP) ## end-to-end tests
	$(PY) -m pytest -m e2e tests/e2e

test-tools: $(STAMP) ## checks by pinned external tools: checkov, promtool (fetched into .cache)
	$(PY) -m pytest -m tools tests/tools

lint: $(STAMP) ## ruff check and format, and mypy (strict on obsingest/, defaults elsewhere; pyproject.toml)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

bench: $(STAMP) ## every benchmark (ONLY="a b": just those); writes benchmarks/results/*.json and benchmarks/README.md
	$(PY) -m benchmarks.run_all $(ONLY)

lock: ## re-resolve requirements.lock from pyproject.toml
	@test -x $(VENV)/bin/uv || { $(PYTHON) -m venv $(VENV) && $(PY) -m pip install -q uv==$(UV_VERSION); }
	$(VENV)/bin/uv pip compile -q --python-version 3.11 --extra dev --extra butler pyproject.toml -o requirements.lock --custom-compile-command "make lock"

stack-up: $(STAMP) ## start Kafka, Pub/Sub, GCS, PostgreSQL locally (native processes)
	$(VENV)/bin/obsingest stack up

stack-down: $(STAMP) ## stop exactly what stack-up started
	$(VENV)/bin/obsingest stack down

stack-status: $(STAMP) ## health of the local services
	$(VENV)/bin/obsingest stack status

prism: ## build Beam's Prism runner (Go) into .cache/bin for --runner=PrismRunner
	GOPATH=$(abspath $(CACHE))/go GOBIN=$(abspath $(CACHE))/bin GOFLAGS=-mod=mod \
		$${GO:-$$(command -v go || echo /usr/local/go/bin/go)} install github.com/apache/beam/sdks/v2/go/cmd/prism@v2.77.0

function-zip: $(STAMP) ## source archive of the register function for Cloud Functions (infra/terraform)
	$(PY) infra/gcf/build.py build/register-function.zip

clean: ## remove demo output and run state (keeps the artefact cache)
	rm -rf demo-output .run

.PHONY: terraform-check
terraform-check: $(STAMP) ## infra/terraform: checkov, Google provider schema, terraform fmt (first run builds Terraform from the Go module proxy, 10-15 min)
	OBSINGEST_TERRAFORM_BUILD=1 $(PY) -m pytest tests/tools/test_terraform.py

.PHONY: chaos
chaos: $(STAMP) ## the chaos suite: every fault scenario on the whole pipeline, the facility ones also on a Butler registry (~2,300 CCDs, ~30 min); writes docs/reliability.md; then the file-store destination full for 60 s under 300 CCDs
	$(PY) -m tests.chaos
	OBSINGEST_DEST_FULL_CCDS=300 OBSINGEST_DEST_FULL_SECONDS=60 $(PY) -m pytest -p no:cacheprovider tests/integration/test_destination_full.py

.PHONY: docker docker-down images test-containers
docker: ## a Docker engine: one that answers is used as is; else docker.io is installed and dockerd started (recorded in .run/docker/)
	@bash infra/containers/engine.sh up

docker-down: ## stop exactly the dockerd `make docker` started (nothing if it found one running)
	@bash infra/containers/engine.sh down

images: $(STAMP) docker ## images for container runs: the official ones where they pull, else stand-ins built offline (.cache/images/)
	$(PY) -m infra.containers.images

test-containers: $(STAMP) ## contract suites, an end-to-end run and the downstream example on containers; stops what it started
	@bash infra/containers/test-containers.sh $(PY)

.PHONY: soak
soak: $(STAMP) ## the soak: its CI variant (3 x 205 every 6 s, 1 function SIGKILL), then 5 x 205 at Rubin's 17 s with a function SIGKILL in each burst (SEED=n replays); writes benchmarks/results/soak.json
	OBSINGEST_SOAK_SEED=$(SEED) $(PY) -m pytest -p no:cacheprovider -m soak -s tests/soak/soak_ci.py
	$(PY) -m tests.soak $(if $(SEED),--seed $(SEED))
