"""[simulation] The `specforge` command: the help texts the guide shows, and a train that checks what it is given."""

from __future__ import annotations

import sys

import click
import rehearsal_simulation

# Laid out as click does for an 80-column terminal (78 columns of text), whatever the terminal says.
CONTEXT = {"help_option_names": ["-h", "--help"], "terminal_width": 78}
ROLES = ["auto", "all", "producer", "consumer", "both"]


def main() -> None:
    """The `specforge` command: says it is a simulation (on stderr: stdout is the guide's), records the call."""
    rehearsal_simulation.say("specforge: guide-guard rehearsal stand-in (the real help texts, a one-step trainer)")
    rehearsal_simulation.record("specforge")
    cli(prog_name="specforge")


@click.group(context_settings=CONTEXT)
def cli() -> None:
    """SpecForge: speculative decoding training framework."""


@cli.command(short_help="train a draft model from a typed config")
@click.option("-c", "--config", "config_path", type=click.Path(), required=True, help="YAML or JSON run config.")
@click.option(
    "--role",
    type=click.Choice(ROLES),
    default="auto",
    show_default=True,
    help="Launch selection: offline local 'all' or online/disaggregated producer+consumer when 'auto'.",
)
@click.option("--node-rank", type=int, default=None, help="Node-local rank for an explicit multi-node trainer launch.")
@click.option("--plan", is_flag=True, help="Print the resolved process plan without starting workers.")
@click.argument("overrides", nargs=-1)
def train(config_path: str, role: str, node_rank: int | None, plan: bool, overrides: tuple[str, ...]) -> None:
    """Train a draft model from a typed run config.

    OVERRIDES are dotted ``section.field=value`` assignments applied on top of
    the config file, e.g. ``training.learning_rate=1e-4``.
    """
    from specforge import application, launch_plan  # noqa: F401  # imported here, as the real train does

    sys.exit(launch_plan.run(config_path, role, overrides, plan=plan))


@cli.command(short_help="materialize a runtime checkpoint as a model directory")
@click.argument("checkpoint")
def export(checkpoint: str) -> None:
    """Materialize a runtime checkpoint as a model directory."""
    rehearsal_simulation.say("specforge export is not simulated")
    sys.exit(2)


@cli.command(short_help="benchmark an SGLang server across tasks and configurations")
@click.argument("url")
def benchmark(url: str) -> None:
    """Benchmark a running SGLang server."""
    rehearsal_simulation.say("specforge benchmark is not simulated")
    sys.exit(2)
