# make lint | type | test | bench
.PHONY: lint type test bench

lint:
	python3 -m ruff check src tests benchmarks examples

type:
	python3 -m mypy

test:
	python3 -m pytest

bench:
	bash benchmarks/compare_sqlite.sh
	bash benchmarks/compare_postgres.sh
