# Two commands: `make demo` and `make test`. Both bootstrap .venv on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo serve test bench check-java browser clean

check-java:
	@scripts/check_java.sh

$(STAMP): pyproject.toml
	@scripts/check_java.sh
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing streamwarden and its dependencies into $(VENV) (PySpark is about 450 MB: a few minutes the first time)"
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,bench]'
	@echo "compiling streamwarden's JVM operators with javac (once; about 2 minutes on 2 cores)"
	$(BIN)/python -m streamwarden.engine.jvm >/dev/null
	@echo "ready: $(VENV) (streamwarden $$($(BIN)/streamwarden --version 2>/dev/null | cut -d' ' -f2))"
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/streamwarden demo

serve: $(STAMP)
	$(BIN)/streamwarden demo --serve

# The console's browser test drives Debian's Chromium: installed here when missing (as root with apt).
browser:
	@scripts/ensure_browser.sh

test: $(STAMP) browser
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python -m bench.run

clean:
	rm -rf .streamwarden spark-warehouse metastore_db derby.log .pytest_cache .hypothesis
