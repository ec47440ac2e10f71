"""Split hygiene, measured: frostgym's own splits checked against each other.

Why its own module: the README says no test question is also a train question, because
every task belongs to the split its prompt hashes into (``frostgym.core.splits``). That
rules out the same prompt in two splits, not a near copy: a template with other numbers,
an API question about another city. This runs the contamination check with one split as
the training data and a later one as the eval side: each generated train split (its first
``train_samples`` draws, seeded, the same on every machine) against dev, test and private,
and dev against test and private, test against private, for every env. ``exact`` counts the
eval tasks whose normalised text is a training text's; ``contaminated`` those the check
flags.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from frostgym.contamination.check import check_texts
from frostgym.contamination.evalset import EvalTask, eval_tasks, has_generated_train, train_texts
from frostgym.contamination.ngrams import tokens
from frostgym.contamination.report import Parameters
from frostgym.core.splits import Split
from frostgym.envs.specs import EnvSpec

#: The splits compared, earliest first: each is checked against every earlier one.
ORDER: tuple[Split, ...] = ("train", "dev", "test", "private")
DEFAULT_TRAIN_SAMPLES = 20_000


@dataclass(frozen=True)
class SplitPair:
    """One env's ``eval_split`` checked against its ``train_split`` (``train`` is the first
    ``train_documents`` generated draws): tasks, exact copies, flagged tasks, and the highest
    figures any task reached, with that task's id."""

    env: str
    train_split: str
    eval_split: str
    train_documents: int
    tasks: int
    exact: int
    contaminated: int
    max_ngram_overlap: float
    max_minhash_similarity: float
    worst_task: str | None


def split_hygiene(
    specs: Sequence[EnvSpec], parameters: Parameters | None = None, *, train_samples: int = DEFAULT_TRAIN_SAMPLES
) -> Iterator[SplitPair]:
    """Every pair of splits of every env of ``specs``, in ``ORDER`` (pairs with an empty
    side are left out)."""
    parameters = parameters or Parameters()
    for spec in specs:
        fixed = {split: eval_tasks([spec], (split,)) for split in ORDER[1:]}
        sides: list[tuple[Split, list[str]]] = []
        if has_generated_train(spec):
            sides.append(("train", list(train_texts(spec, train_samples))))
        sides += [(split, [task.text for task in tasks]) for split, tasks in fixed.items()]
        for number, (train_split, texts) in enumerate(sides):
            later = [fixed[split] for split, _ in sides[number + 1 :] if split != "train" and fixed[split]]
            if texts and later:
                yield from _pairs(spec, train_split, texts, later, parameters)


def _pairs(
    spec: EnvSpec, train_split: str, texts: list[str], later: list[list[EvalTask]], parameters: Parameters
) -> Iterator[SplitPair]:
    """``texts`` checked against each later split's tasks, in one pass over the texts (a
    task's figures do not depend on the other tasks checked with it)."""
    overlaps = check_texts(texts, [task for tasks in later for task in tasks], parameters)
    seen = {b" ".join(tokens(text)) for text in texts}
    start = 0
    for tasks in later:
        mine, start = overlaps[start : start + len(tasks)], start + len(tasks)
        worst = max(mine, key=lambda o: (max(o.ngram_overlap, o.minhash_similarity), o.task_id))
        yield SplitPair(
            env=str(spec),
            train_split=train_split,
            eval_split=tasks[0].split,
            train_documents=len(texts),
            tasks=len(tasks),
            exact=sum(b" ".join(tokens(task.text)) in seen for task in tasks),
            contaminated=sum(o.contaminated for o in mine),
            max_ngram_overlap=max(o.ngram_overlap for o in mine),
            max_minhash_similarity=max(o.minhash_similarity for o in mine),
            worst_task=worst.task_id,
        )
