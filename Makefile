# Two entry points for a fresh machine (see README.md):
#   make demo   set up .venv, convert torchvision resnet50 on the default backend, print the result
#   make test   set up .venv, run ruff, mypy and the test suite
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
TORCH_PINS ?= torch==2.14.1 torchvision==0.29.1

.PHONY: setup demo test lint typecheck pytest clean

$(VENV)/.installed: pyproject.toml Makefile
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q $(TORCH_PINS)
	$(PIP) install -q -e ".[dev,rtx]"
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(VENV)/bin/torch2trt-lite convert torchvision:resnet50 --shape 2x3x224x224 -o resnet50.engine

lint: setup
	$(VENV)/bin/ruff check torch2trt_lite converters plugins_cuda tests samples benchmarks tools

typecheck: setup
	$(VENV)/bin/mypy

pytest: setup
	$(VENV)/bin/pytest -q

test: lint typecheck pytest

clean:
	rm -rf $(VENV) *.egg-info resnet50.engine
