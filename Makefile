# Two commands: `make demo` and `make test`. Both bootstrap .venv on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench check-java clean

check-java:
	@scripts/check_java.sh

$(STAMP): pyproject.toml
	@scripts/check_java.sh
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,bench]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/streamwarden demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python -m bench.run

clean:
	rm -rf .streamwarden spark-warehouse metastore_db derby.log .pytest_cache .hypothesis
