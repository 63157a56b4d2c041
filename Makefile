# Every target bootstraps what it needs from a bare machine with Python 3.11.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: all demo test check lint format typecheck bench clean system-deps docs docs-serve screenshots

all: check

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[all,dev]'
	touch $(STAMP)

# Browser tests need Debian's chromium; installed when we are root and it is missing.
system-deps:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null) \
	      || echo "warning: could not install chromium"; \
	  else echo "warning: chromium missing and not root; browser tests will fail"; fi; \
	fi

demo: $(STAMP)
	$(BIN)/python examples/demo.py

test: $(STAMP) system-deps
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff format --check src tests bench examples docs
	$(BIN)/ruff check src tests bench examples docs

format: $(STAMP)
	$(BIN)/ruff format src tests bench examples docs
	$(BIN)/ruff check --fix src tests bench examples docs

typecheck: $(STAMP)
	$(BIN)/mypy

check: lint typecheck docs $(STAMP) system-deps
	$(BIN)/python -m pytest --cov --cov-report=term

# The documentation site (MkDocs, strict: a broken link or reference fails the build).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

bench: $(STAMP)
	$(BIN)/python -m bench

# Pictures of the viewer and the HTML report for the docs (docs/images/), from the demo.
screenshots: $(STAMP) system-deps
	$(BIN)/python docs/screenshots.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .coverage site
