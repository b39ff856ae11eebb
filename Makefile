# make lint | type | test | test-fast | bench | docs
.PHONY: lint type test test-fast bench docs

lint:
	python3 -m ruff check src tests benchmarks examples

type:
	python3 -m mypy

test:
	python3 -m pytest

# the loop while changing code: no PostgreSQL, no subprocess, nothing over about 5 s
test-fast:
	python3 -m pytest -q -m "not slow and not postgres"

bench:
	python3 benchmarks/compare.py sqlite
	python3 benchmarks/compare.py postgres
	python3 benchmarks/crash_postgres.py

docs:
	NO_MKDOCS_2_WARNING=1 python3 -m mkdocs build --strict -d site
