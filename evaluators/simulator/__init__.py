"""The LLM user simulator and the batch benchmark (iEvaLM and CoRE protocols, CONCEPT personas).

* :mod:`.records` — dataset records seeding users, targets mapped to the systems' catalog;
* :mod:`.user` — the simulated user (prompts in ``assets/prompts/simulator.toml``), leak handling;
* :mod:`.leaks` — finding and redacting target titles in the user's messages;
* :mod:`.protocols` — CoRE, iEvaLM free-form and attribute dialogues, persuasiveness, reliability;
* :mod:`.personas` — emotion × age personas, the sincerity and reliability signals;
* :mod:`.batch` — records × systems, concurrent and resumable, evaluated and reported;
* :mod:`.report` — per-dialogue and per-system tables, plotly charts, HTML and CSV.
"""

from evaluators.simulator.batch import (
    BatchResult,
    SimulationConfig,
    SystemNotReady,
    UnknownSystem,
    check_systems,
    run_simulation,
)
from evaluators.simulator.protocols import PROTOCOLS, Protocol, run_dialogue
from evaluators.simulator.records import Case, RecordError
from evaluators.simulator.user import SimulatedUser, SimulatorError

__all__ = [
    "PROTOCOLS",
    "BatchResult",
    "Case",
    "Protocol",
    "RecordError",
    "SimulatedUser",
    "SimulationConfig",
    "SimulatorError",
    "SystemNotReady",
    "UnknownSystem",
    "check_systems",
    "run_dialogue",
    "run_simulation",
]
