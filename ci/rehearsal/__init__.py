"""The rehearsal behind `python -m ci.rehearse`: a guide run green against simulations of the machine it targets."""

# The rehearsal's own code is the modules here, an application of the harness that imports of it only its
# public API (ci.__all__), ci.cli and ci.run's main (tests/test_rehearsal_shape.py): model (the sandbox's
# layout, the failure knobs, what the report lists), fake_hub (the Hugging Face Hub on loopback), namespaces
# (private network and mount namespaces), sandbox (building it, and ci.run's environment), sweep (simulated
# processes that outlive the run), report. simulations/ is data instead: the stand-ins, package data copied
# into the sandbox at every run, never imported or type-checked as part of the harness (README.md lists them).

__all__: list[str] = []
