"""The rehearsal behind `python -m ci.rehearse`: a guide run green against simulations of the machine it targets."""

# The harness's side is the modules here: model (the sandbox's layout, the failure knobs, what the
# report lists), fake_hub (the Hugging Face Hub on loopback), namespaces (private network and mount
# namespaces), sandbox (building it, and ci.run's environment), sweep (simulated processes that
# outlive the run), report. simulations/ is data instead: the stand-ins, package data copied into
# the sandbox at every run, never imported or type-checked as part of the harness (README.md lists them).

__all__: list[str] = []
