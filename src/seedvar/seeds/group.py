"""Several seeds of one recipe in one process (`train.seeds_per_process`): each seed's life
(seeds/seed.py) is claimed, tracked, evaluated and published on its own, as a seed trained alone
is; where they train, those that train from the start train stacked in one Trainer
(`fine_tune_stacked`), each seed's curves sent to its own MLflow run.

A seed finished before is published as it is; one trained before goes straight to evaluation;
one that resumes a training checkpoint of its own (left by an attempt that trained it alone)
trains alone. A seed whose loss became non-finite fails alone: its neighbours are published.

Stacked training saves its group's checkpoint as a seed alone saves its own (every
`train.checkpoint_every_minutes`), in every seed's work folder (hard links), each seed's MLflow
run going on where it stopped: an interrupted group resumes whole from it when its seeds meet
again in one process, as they do when the study is run again unchanged. A seed whose group's
checkpoint cannot resume (its group is not all here) fails once, its checkpoint removed, and
starts over at its next attempt; with `train.seeds_per_process` set back to 1 it starts over at
once. No seed is ever torn: each is trained, saved and published whole or not.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from transformers import PreTrainedModel

from seedvar.seeds.finished import TRAJECTORY
from seedvar.seeds.result import SeedResult
from seedvar.seeds.seed import SeedLife, Training, goes_on
from seedvar.seeds.trajectory import Trajectory
from seedvar.tracking.logger import SeedsLogger
from seedvar.training.fit import fine_tune_stacked
from seedvar.training.module import diverged, seed_key
from seedvar.training.resume import ResumeCheckpoint, saved_at

Outcome = SeedResult | BaseException  # how a seed's life ended: its result, or its error
Trained = PreTrainedModel | BaseException  # a seed's model, or the error that stopped it


def live_together(lives: Sequence[SeedLife]) -> list[Outcome]:
    """Each of `lives` to its end, those that train trained together (`train_together`): each
    seed's result or error, in order. An interrupt ends every life begun (each seed's run ends
    KILLED), then is raised."""
    outcomes: dict[int, Outcome] = {}
    waiting: dict[int, Training] = {}
    for index, life in enumerate(lives):
        try:
            waiting[index] = next(life)
        except StopIteration as ended:  # finished before, or trained before
            outcomes[index] = ended.value
        except BaseException as error:
            outcomes[index] = error
            if _interrupt(outcomes.values()):
                break
    stopped = _interrupt(outcomes.values())
    trained = dict.fromkeys(waiting, stopped) if stopped else train_together(waiting)
    for index in reversed(list(waiting)):  # the last begun ends first, as nested blocks do
        try:
            outcomes[index] = goes_on(lives[index], trained[index])
        except BaseException as error:
            outcomes[index] = error
    if interrupt := _interrupt(outcomes.values()):
        raise interrupt
    return [outcomes[index] for index in range(len(lives))]


def train_together(waiting: dict[int, Training]) -> dict[int, Trained]:
    """Each waiting seed's model, or the error that stopped it: those that resume their group's
    checkpoint stacked from it (`_resumed`), those that train from the start stacked (two or
    more), the others alone; after an interrupt, none."""
    saved = {i: saved_at(t.checkpoint) for i, t in waiting.items() if t.checkpoint}
    of_group = {i: (waiting[i], seeds) for i, (_, seeds) in saved.items() if seeds}
    trained: dict[int, Trained] = _resumed(of_group, saved) if of_group else {}
    together = {i: t for i, t in waiting.items() if t.checkpoint is None and not t.callbacks}
    if len(together) > 1 and not _interrupt(trained.values()):
        trained |= _stacked(together)
    for index, training in waiting.items():
        if index in trained:
            continue
        if stopped := _interrupt(trained.values()):
            trained[index] = stopped
            continue
        try:
            trained[index] = training.alone()
        except BaseException as error:
            trained[index] = error
    return trained


def _resumed(
    group: dict[int, tuple[Training, list[int]]],
    saved: dict[int, tuple[int | None, list[int] | None]],
) -> dict[int, Trained]:
    """Seeds holding their group's checkpoint (each with the seeds it records), trained stacked
    from the latest of their copies (`saved`: each one's step) where they are that whole group,
    in its order; else each fails, its checkpoint removed (its next attempt starts it over)."""
    here = [training.config.train.seed for training, _ in group.values()]
    if any(seeds != here for _, seeds in group.values()):
        return {i: training.not_resumable(seeds, here) for i, (training, seeds) in group.items()}
    latest = max(group, key=lambda index: saved[index][0] or 0)
    trainings = {index: training for index, (training, _) in group.items()}
    return _stacked(trainings, trainings[latest].checkpoint)


def _stacked(group: dict[int, Training], checkpoint: Path | None = None) -> dict[int, Trained]:
    """The `group`'s seeds trained stacked (from their group's `checkpoint` if given), their
    checkpoint saved in each seed's work folder: each one's model, or its error (a seed that
    diverged alone fails alone)."""
    trainings = list(group.values())
    first = trainings[0]
    seeds = [training.config.train.seed for training in trainings]
    logger = SeedsLogger({seed_key("", t.config.train.seed): t.logger for t in trainings})
    paths = [training.job.work_dir / TRAJECTORY for training in trainings]
    pad = first.pad_token_id
    trajectory = [Trajectory(first.config, first.probes, pad, paths)] if first.probes else []
    fences = [training.fence for training in trainings]
    configs = [training.config for training in trainings]
    every = first.config.train.checkpoint_every_minutes, first.config.train.checkpoint_every_n_steps
    own = [training.job.checkpoint for training in trainings]
    saves = ResumeCheckpoint(own[0], *every, links=own[1:])
    try:
        models, diverged_at = fine_tune_stacked(
            configs, first.tokenized, pad, [*fences, saves, *trajectory], logger, checkpoint
        )
    except BaseException as error:
        return dict.fromkeys(group, error)
    rate = first.config.train.learning_rate
    return {
        index: diverged(diverged_at[seed], rate) if seed in diverged_at else model
        for index, seed, model in zip(group, seeds, models, strict=True)
    }


def _interrupt(outcomes: Iterable[object]) -> BaseException | None:
    """The first of `outcomes` that is an interrupt (an error, not an Exception: Ctrl-C)."""
    found = (o for o in outcomes if isinstance(o, BaseException) and not isinstance(o, Exception))
    return next(found, None)
