# Sourced by the scripts that run on a lent accelerator (bench/device.sh, bench/gpu_training.sh):
# installs the wheels of .whl/ (`make device-wheels`, which the device machines lack) when
# that folder travelled, and sets PYTHONPATH and $python (the repository's .venv on a CPU).
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/azshogi-site .whl/*.whl
    export PYTHONPATH="/tmp/azshogi-site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
python=python3
if [ -x .venv/bin/python ]; then python=.venv/bin/python; fi
