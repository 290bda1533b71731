# Two commands: `make demo` and `make test`. Both bootstrap .venv on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo serve test bench check-java browser jars clean

check-java:
	@scripts/check_java.sh

$(STAMP): pyproject.toml
	@scripts/check_java.sh
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing streamwarden and its dependencies into $(VENV) (PySpark is about 450 MB: a few minutes the first time)"
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,bench]'
	@echo "ready: $(VENV) (streamwarden $$($(BIN)/streamwarden --version 2>/dev/null | cut -d' ' -f2))"
	@touch $(STAMP)

# The JVM side through Maven: the operators, Spark's Kafka connector, a Kafka broker (build/).
JARS := build/jvm/.built
$(JARS): pom.xml scripts/broker/pom.xml $(wildcard src/streamwarden/engine/jvm/java/streamwarden/jvm/*.java)
	@scripts/check_java.sh
	@scripts/build_jars.sh
	@touch $(JARS)

jars: $(JARS)

demo: $(STAMP) $(JARS)
	$(BIN)/streamwarden demo

serve: $(STAMP) $(JARS)
	$(BIN)/streamwarden demo --serve

# The console's browser test drives Debian's Chromium: installed here when missing (as root with apt).
browser:
	@scripts/ensure_browser.sh

test: $(STAMP) $(JARS) browser
	$(BIN)/python -m pytest -q

bench: $(STAMP) $(JARS)
	$(BIN)/python -m bench.run

clean:
	rm -rf .streamwarden spark-warehouse metastore_db derby.log .pytest_cache .hypothesis
