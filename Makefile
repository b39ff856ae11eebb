# make lint | type | test | bench
.PHONY: lint type test bench

lint:
	python3 -m ruff check src tests benchmarks examples

type:
	python3 -m mypy

test:
	python3 -m pytest

bench:
	python3 benchmarks/compare.py sqlite
	python3 benchmarks/compare.py postgres
	python3 benchmarks/crash_postgres.py
