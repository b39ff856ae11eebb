# make lint | test | bench
.PHONY: lint test bench

lint:
	python3 -m ruff check src tests benchmarks examples

test:
	python3 -m pytest

bench:
	bash benchmarks/compare_sqlite.sh
	bash benchmarks/compare_postgres.sh
