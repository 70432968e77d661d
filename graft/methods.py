"""Methods as data: one validated record of switches, and a named preset for every row the paper reports.

A paper row (GRPO, GRAFT, HACPO, SGT, archive replay, each ablation of Table 2) is a ``Method`` value, never a
copy of the training loop: the loop reads these switches. Adding an ablation means adding a preset here or a
``methods:`` entry in the YAML config (``{base: graft, delta: 0.85}``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NamedTuple

from graft.errors import ConfigError
from graft.names import check_distinct
from graft.typed_config import (
    Bounds,
    Count,
    Decay,
    NonNegative,
    NonNegativeInt,
    OpenShare,
    Positive,
    from_dict,
    parse_strings,
)


@dataclass(frozen=True)
class Method:
    """The switches that define a training method (docs/design.md section 2, last paragraph)."""

    n: Annotated[int, Bounds(ge=2)] = 8
    """Responses sampled per prompt and model (GRPO n = 8, 16, 32 in the paper)."""

    peer: Literal["none", "live", "archive"] = "none"
    """Where peer trajectories come from: none (plain GRPO), a co-trained model, or a stored GRPO run."""

    select: Literal["none", "complementary", "any_success", "all", "random_prompts"] = "none"
    """Which prompts transfer. complementary: Eq. 4 (receiver 0/n, source 1..n-1); any_success: SGT's rule
    (receiver 0/n, source >= 1); all: every prompt (HACPO); random_prompts: as many prompts as the
    complementary rule selects in that direction, drawn uniformly from the batch (Appendix G)."""

    balanced: bool = False
    """Balanced exchange (Section 4.1): keep the top m = min(|C_AB|, |C_BA|) per direction, with ties.
    Needs a live peer; with random_prompts it sets the count to match."""

    peer_choice: Literal["most_successes", "random"] = "most_successes"
    """In a group of more than two models, which peer's group replaces a receiver's all-fail group when several
    peers have a mixed one on the prompt (graft.algo.group_selection): the one with the most successes (ties to
    the peer first in the group), or one drawn at random (the ablation). Pairs have one peer."""

    transfer: Literal["group", "success_only", "one_success"] = "group"
    """What the peer sends for a selected prompt: its whole group; only its correct responses (advantages
    still from the full group); or one correct response drawn uniformly (SGT)."""

    keep_own: bool = False
    """Keep the receiver's own group beside the peer's (pooled, HACPO, SGT) instead of replacing it
    (GRAFT)."""

    advantage: Literal["source", "pooled", "hacpo"] = "source"
    """Peer-response advantages: as the source computed them on its own group (GRAFT), renormalised over the
    own n + peer n rewards (Eq. 12), or HACPO's capability-weighted estimate."""

    gate: Literal["compat", "none"] = "compat"
    """compat: weight w = 1[s > delta] min(s, cap) (Eq. 8); none: w = 1 for every peer response."""

    delta: Decay = 0.8
    """Compatibility floor; responses with s <= delta are dropped. 0 admits all (the "w/o floor" ablation)."""

    cap: Positive = 1.0
    """Upper bound on the compatibility weight."""

    admission: Literal["floor", "random"] = "floor"
    """floor: admit s > delta; random: admit as many as pass the floor, drawn uniformly, with weight
    min(s, cap) (Eq. 11)."""

    ratio: Literal["token", "sequence", "sequence_peer"] = "token"
    """Importance ratio of Eq. 10: per token (Eq. 9); one length-normalised ratio per response, own and peer
    alike ("w/o token ratio"); or that sequence ratio on peer responses only, own ones keeping Eq. 9."""

    order: Literal["peer_last", "peer_first", "uniform", "prompt", "self_first"] = "peer_last"
    """Where minibatches holding grafted groups go in every epoch; uniform shuffles the minibatch order;
    prompt keeps the batch's prompt order (original SGT); self_first splits responses, not groups: all own
    ones, then all peer ones (HACPO's official trainer)."""

    update: Literal["clipped", "luffy", "hacpo", "nll"] = "clipped"
    """Update rule for peer responses: Eq. 10's clipped token ratio; LUFFY's f(pi) a with no clip; HACPO's
    sequence-level rule; or SGT's auxiliary NLL on the transferred correct response."""

    eps_low: OpenShare = 0.2
    """Lower PPO clip range of Eq. 10."""

    eps_high: Positive = 0.28
    """Upper PPO clip range of Eq. 10 (DAPO's clip-higher)."""

    minibatches: Count | None = None
    """Optimizer updates per step; None takes the run config's value (4 minibatches of 32 prompts in the
    paper). Every built-in preset takes it, so all methods make the same number of updates: HACPO's official
    trainer cuts 128 x (8 own + 8 peer) responses into minibatches of 64 prompts x 8, i.e. the paper's 4."""

    nll_coef: NonNegative = 0.1
    """SGT's lambda: weight of the NLL term added to the GRPO loss."""

    luffy_gamma: Positive = 0.1
    """gamma of LUFFY's shaping f(x) = x / (x + gamma)."""

    kl_coef: NonNegative = 0.0
    """Low-variance KL to the initial policy on own samples (HACPO: 1e-3; GRAFT and GRPO: none)."""

    hacpo_clip_low: NonNegative = 3e-4
    """HACPO's own-sample sequence ratio clip, lower delta."""

    hacpo_clip_high: NonNegative = 4e-4
    """HACPO's own-sample sequence ratio clip, upper delta."""

    hacpo_cross_delta: Decay = 0.2
    """HACPO's peer ratio lower bound starts at 1 - this."""

    hacpo_cross_step: NonNegative = 0.025
    """HACPO's peer ratio lower bound rises by this per minibatch update within a step."""

    hacpo_window: Count = 5
    """Steps over which HACPO's capability P_k averages the mean reward."""

    dynamic_sampling: bool = False
    """DAPO's dynamic sampling (Yu et al. 2025; the paper's "GRPO (n=8) + Dynamic Sampling", Fig. 3a, Table 5):
    groups with zero reward variance (all correct or all wrong) are dropped and further prompts are sampled until
    the step has ``prompts_per_step`` informative groups or ``resample_rounds`` extra draws were made. Costs
    extra rollouts, counted in the metrics (``rollouts``). Single-model runs only."""

    resample_rounds: NonNegativeInt = 4
    """Extra prompt draws per step at most under dynamic sampling; a step that still has fewer informative groups
    trains on those it has (metric ``ds_groups``). DAPO's verl recipe caps its draws the same way
    (``max_num_gen_batches``)."""

    def __post_init__(self) -> None:
        _check_method(self)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _fail(field_name: str, message: str) -> None:
    raise ConfigError(f"method.{field_name}: {message}")


def _check_method(m: Method) -> None:
    """The combinations the loop cannot run, each refused with one line (each switch's range is its annotation,
    checked when a preset is read: ``with_switches``)."""
    if m.dynamic_sampling and m.peer != "none":
        _fail("dynamic_sampling", f"true is not allowed with peer {m.peer!r}: it is a single-model GRPO baseline")
    if (m.peer == "none") != (m.select == "none"):
        _fail("select", f"{m.select!r} with peer {m.peer!r}: a peer and a selection rule go together")
    if m.balanced and m.peer == "archive":
        _fail("balanced", "true is not allowed with peer 'archive': replay is one-way, so balancing is off")
    if m.balanced and m.select not in ("complementary", "any_success", "random_prompts"):
        _fail("balanced", f"true needs select complementary, any_success or random_prompts, not {m.select!r}")
    if (m.update == "hacpo") != (m.advantage == "hacpo"):
        _fail("update", "'hacpo' and advantage 'hacpo' go together")
    if (m.update == "nll") != (m.transfer == "one_success"):
        _fail("update", "'nll' and transfer 'one_success' go together")
    if m.update == "hacpo" and m.transfer != "group":
        _fail("transfer", f"{m.transfer!r} is not allowed with update 'hacpo': the HACPO update transfers whole groups")
    if m.advantage in ("pooled", "hacpo") and not m.keep_own:
        _fail("keep_own", f"false is not allowed with advantage {m.advantage!r}: it pools the own group")
    if m.update == "nll" and not m.keep_own:
        _fail("keep_own", "false is not allowed with update 'nll': SGT adds its term to the own GRPO loss")
    if m.admission == "random" and m.gate != "compat":
        _fail("admission", "'random' needs gate 'compat': the floor sets the admission count")


def group_problem(m: Method) -> str | None:
    """Why a method cannot train a group of more than two models, or None. A group's exchange is GRAFT's: live
    peers, complementary prompts, each transferred group with its source's advantages; HACPO and the pooled
    advantage combine exactly two groups, SGT's and the other selections' rules are defined for one peer."""
    if m.peer != "live":
        return f"peer {m.peer!r}: a group co-trains its models (peer 'live')"
    if m.select != "complementary":
        return f"select {m.select!r}: a group selects by Eq. 4 in every direction (select 'complementary')"
    if m.advantage != "source" or m.update not in ("clipped", "luffy"):
        return f"advantage {m.advantage!r} and update {m.update!r}: they combine exactly two groups"
    return None


class Registry(dict):
    """The entries of one switch of ``Method`` (its ``select``, ``transfer``, ``advantage``, ``gate``...), keyed by
    the switch's values; the code that runs a method looks each rule up here, never by comparing the switch's
    string (CONTRIBUTING.md, "Adding a rule")."""

    def __init__(self, switch: str):
        super().__init__()
        self.switch = switch

    def register(self, value: str):
        """A decorator adding its function (or class) under ``value``, once."""

        def add(entry):
            if value in self:
                raise ValueError(f"{self.switch} rule {value!r} is registered twice")
            self[value] = entry
            return entry

        return add

    def of(self, method: Method):
        """The entry of ``method``'s value of this switch."""
        return self[getattr(method, self.switch)]


class Preset(NamedTuple):
    method: Method
    label: str
    """How reports name the row."""
    table: str
    """Where the paper reports it: "1" (main table), "2a", "2b", "F" (delta sweep), "stored", "5" (the cost
    table only); "group": beyond the paper, for groups of more than two models."""
    note: str = ""
    """The definition we chose where the paper's text leaves it open, with the passage it rests on
    (``graft methods`` prints it)."""


_GRAFT = Method(peer="live", select="complementary", balanced=True)
# HACPO's official trainer (zzx-peter/HACRL-code): own trajectories first, no shuffle, 64-prompt minibatches of
# 2 x 128 x 8 responses -> 2 own-only then 2 peer-only updates, peer clip bounds 0.85 and 0.875. Its minibatch
# holds twice a GRPO minibatch's prompts, so it makes the run's update count (4 in the paper), not a fixed 4: at
# the miniature's 2 a fixed 4 gave HACPO twice the updates of every other method.
_HACPO_UPDATE: dict[str, Any] = dict(
    keep_own=True, advantage="hacpo", update="hacpo", gate="none", kl_coef=1e-3, order="self_first"
)
# Original SGT has no peer placement: minibatches follow the prompt order.
_SGT_UPDATE: dict[str, Any] = dict(transfer="one_success", keep_own=True, update="nll", gate="none", order="prompt")


def _graft(**changes: Any) -> Method:
    return dataclasses.replace(_GRAFT, **changes)


PRESETS: dict[str, Preset] = {
    "grpo_n8": Preset(Method(n=8), "GRPO (n=8)", "1"),
    "grpo_n16": Preset(Method(n=16), "GRPO (n=16)", "1"),
    "grpo_n32": Preset(Method(n=32), "GRPO (n=32)", "1"),
    "grpo_n8_ds": Preset(
        Method(n=8, dynamic_sampling=True),
        "GRPO (n=8) + DS",
        "5",
        "DAPO's dynamic sampling: zero-variance groups dropped, fresh prompts drawn (at most resample_rounds extra "
        "draws) until the step holds prompts_per_step informative groups; the paper (Fig. 3a, Table 5) gives no "
        "cap, ours is 4",
    ),
    "graft": Preset(_GRAFT, "GRAFT", "1"),
    "hacpo": Preset(Method(peer="live", select="all", **_HACPO_UPDATE), "HACPO", "1"),
    "sgt": Preset(Method(peer="live", select="any_success", **_SGT_UPDATE), "SGT", "1"),
    "replay": Preset(_graft(peer="archive", balanced=False), "GRAFT (stored trajectories)", "stored"),
    # Table 2a: remove or randomise one component.
    "graft_no_gate": Preset(_graft(gate="none"), "w/o compat. gate", "2a"),
    "graft_no_floor": Preset(_graft(delta=0.0), "w/o compat. floor", "2a"),
    # Table 8: this row "is identical to" SGT's selection (k_src >= 1, all-correct peer groups included) with
    # GRAFT's update
    "graft_unbalanced": Preset(_graft(balanced=False, select="any_success"), "w/o balancing", "2a"),
    "graft_seq_ratio": Preset(
        _graft(ratio="sequence"),
        "w/o token ratio",
        "2a",
        "every response, own and peer, takes one length-normalised ratio exp(mean_t log pi_theta/pi_old) in place "
        "of Eq. 9's token ratio, clipped to (0.8, 1.28); the paper (Sec. 6.3) says only 'replacing the "
        "token-level ratio with a sequence-level ratio'",
    ),
    "graft_seq_ratio_peer": Preset(
        _graft(ratio="sequence_peer"),
        "w/o token ratio (peer only)",
        "2a",
        "the second reading of 'w/o token ratio': only peer responses take the sequence ratio, own responses "
        "keep Eq. 9's token ratio (the paper does not say which responses the replacement covers)",
    ),
    "graft_random_prompts": Preset(_graft(select="random_prompts"), "random prompts", "2a"),
    "graft_random_admission": Preset(_graft(admission="random"), "random admission", "2a"),
    "graft_peer_first": Preset(_graft(order="peer_first"), "peer first", "2a"),
    "graft_uniform": Preset(_graft(order="uniform"), "peer uniform", "2a"),
    # Appendix F: the floor sweep.
    "graft_delta07": Preset(_graft(delta=0.7), "delta = 0.7", "F"),
    "graft_delta09": Preset(_graft(delta=0.9), "delta = 0.9", "F"),
    # Table 2b: alternative transfer and update rules on GRAFT's selection.
    "graft_pooled": Preset(_graft(keep_own=True, advantage="pooled"), "pooled groups", "2b"),
    "graft_success_only": Preset(_graft(transfer="success_only"), "success-only", "2b"),
    "graft_success_only_no_floor": Preset(_graft(transfer="success_only", delta=0.0), "success-only w/o floor", "2b"),
    "graft_hacpo_update": Preset(_graft(**_HACPO_UPDATE), "HACPO update", "2b"),
    "graft_sgt_update": Preset(_graft(**_SGT_UPDATE), "SFT update (SGT)", "2b"),
    "graft_luffy_update": Preset(_graft(update="luffy", gate="none"), "LUFFY update", "2b"),
    # Beyond the paper: the peer choice in a group of more than two models.
    "graft_random_peer": Preset(
        _graft(peer_choice="random"),
        "random peer",
        "group",
        "groups of more than two models only: a receiver's all-fail group is replaced by a candidate peer's drawn "
        "uniformly, not by the peer with the most successes (the paper trains pairs only)",
    ),
}


def preset_names() -> list[str]:
    return list(PRESETS)


def get_method(name: str, custom: dict[str, Any] | None = None) -> Method:
    """The Method for a preset name, or for a user preset defined in the config's ``methods:`` mapping.

    A user preset is ``{base: <preset>, <switch>: <value>, ...}``. Unknown names and bad values raise one
    ConfigError line naming what is allowed.
    """
    custom = custom or {}
    if name in PRESETS:
        return PRESETS[name].method
    if name in custom:
        spec = custom[name]
        if not isinstance(spec, dict) or "base" not in spec:
            raise ConfigError(f"methods.{name}: expected a mapping with a 'base' preset and switch overrides")
        base = spec["base"]
        if base not in PRESETS:
            raise ConfigError(f"methods.{name}.base: unknown preset {base!r}; allowed: {', '.join(PRESETS)}")
        return with_switches(PRESETS[base].method, {k: v for k, v in spec.items() if k != "base"}, f"methods.{name}")
    allowed = ", ".join([*PRESETS, *custom])
    raise ConfigError(f"unknown method preset {name!r}; allowed: {allowed}")


def with_switches(method: Method, switches: dict[str, Any], where: str) -> Method:
    """``method`` with some switches changed (a user preset's, or ``graft train --set method.<switch>=...``), each
    read from text where it is one and checked; ``where`` names them in errors."""
    return from_dict(Method, {**method.to_dict(), **parse_strings(switches, Method)}, where)


def resolve_all(custom: dict[str, Any] | None = None) -> dict[str, dict]:
    """Every built-in and user preset resolved to its switches; resolving validates the user presets, whose names
    must differ from the built-in ones (``get_method`` finds a built-in first, so a user preset of the same name
    would be dropped without a word) and from ``base``, the directory of the base models' evaluations
    (``eval/base/<model>/``)."""
    custom = custom or {}
    check_distinct(
        [
            *((f"the built-in preset {name}", name) for name in PRESETS),
            ("the directory of the base models' evaluations (eval/base/)", "base"),
            *((f"methods.{name}", name) for name in custom),
        ],
        "a user preset needs a name of its own (graft methods lists the built-in ones)",
    )
    return {name: get_method(name, custom).to_dict() for name in [*PRESETS, *custom]}
