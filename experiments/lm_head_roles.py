"""Claim, on real text, by cause: the heads a trained character LM needs most are the ones with
recognisable roles (Voita et al. 2019), once the model is deep and long enough to form them.

Run:  python -m transformer_jax.sweep --experiment=experiments/lm_head_roles.py --workdir=runs/lm_head_roles
(or its suite: scripts/run.sh --suite=circuits). One causal character LM on tiny
Shakespeare (lm_positions.lm_base): 4 layers of 8 heads (d_model 128, d_k 16) over a
128-character context, 4,000 steps of 32 windows (16 M characters, about 16 passes over the
training text), sized to train within 30 minutes on 2 cores: a 100-step probe of this model ran
1.9 steps/s beside a 2-worker sweep (Intel Xeon, 2 CPUs), so about 35 minutes if it shares the
machine throughout and about 20 alone; in its suite it shares the machine for the first third.

A suite of its own (circuits), apart from mechanisms: on a 2-core AMD EPYC (AVX2, no AVX-512)
its one 4,000-step run trains at 3.7 steps/s alone and 1.9 beside the suite's other worker, so
the mechanisms suite with it was on course for about 40 minutes there (10 of 11 variants and
2,800 of its steps in 28 min 30 s); alone it needs about 20.

Why this study: lm_heads' models (2 layers, 64 characters, 1,200 steps) formed no induction
head (largest prefix-matching score 0.01 in every seed) and one previous-token head in 1 seed of
3, so "the heads that matter have roles" could not be asked of them. This is the larger model
issue 31 asks for. One model, one seed, no expectation on its final values: its findings are the
checks below, per head, written before its run:
  roles        a layer-0 head has previous-token score ≥ 0.5; a head in layer ≥ 1 has
               prefix-matching score ≥ 0.3 (an induction head, Olsson et al. 2022)
  by cause     each head knocked out alone before W_o, the rise in eval loss (head_importance):
               the most important head has a role; heads with a role cost more on average than
               heads without; at least 2 of the 4 most important heads have a role; and, as
               Michel et al. 2019 found, at least a quarter of the heads cost < 0.01 nats.
"""
from pathlib import Path

import numpy as np

from transformer_jax.studies.analysis import head_importance, head_roles
from transformer_jax.studies.study import Study, load_module

HERE = Path(__file__).resolve().parent
BITS = "eval/bits_per_char"
SIZES = {  # width, layers, heads, context, batch, steps, peak learning rate
    "tiny": dict(d_model=32, num_layers=2, num_heads=2, seq_len=32, batch=8, steps=20, lr=1e-3),
    "default": dict(d_model=128, num_layers=4, num_heads=8, seq_len=128, batch=32, steps=4000,
                    lr=2e-3),
    "large": dict(d_model=256, num_layers=6, num_heads=8, seq_len=256, batch=64, steps=20000,
                  lr=1e-3),
}
VARIANT = "L4_h8"
TOP = 4  # "at least 2 of the 4 most important heads have a role"
CHEAP, CHEAP_SHARE = 0.01, 0.25  # nats; "at least a quarter of the heads cost < 0.01 nats"


def get_study(size: str) -> Study:
    lm_positions = load_module(HERE / "lm_positions.py")
    base = lm_positions.lm_base(size, **SIZES[size])
    roles = (
        head_roles.Check(f"a layer-0 head has previous-token score ≥ {head_roles.PREVIOUS_TOKEN}",
                         VARIANT, lambda t, i: t.previous[0].max() >= head_roles.PREVIOUS_TOKEN),
        head_roles.Check(f"an induction head formed: a head in layer ≥ 1 has prefix-matching "
                         f"score ≥ {head_roles.INDUCTION}", VARIANT,
                         lambda t, i: t.induction[1:].max() >= head_roles.INDUCTION),
    )
    by_cause = (
        head_importance.Check("the most important head has a role (previous-token or induction)",
                              VARIANT, head_importance.top_head_has_role),
        head_importance.Check("heads with a role cost more on average than heads without",
                              VARIANT, head_importance.roles_cost_more),
        head_importance.Check(f"at least 2 of the {TOP} most important heads have a role",
                              VARIANT, lambda imp, sc: head_importance.roles_in_top(imp, sc, TOP) >= 2),
        head_importance.Check(f"at least {CHEAP_SHARE:.0%} of the heads cost < {CHEAP} nats",
                              VARIANT, lambda imp, sc: np.mean(imp < CHEAP) >= CHEAP_SHARE),
    )
    return Study(
        name="lm_head_roles",
        claim="In a character LM deep and long enough to form them, the heads whose removal "
              "costs most are the ones with recognisable roles (previous-token, induction).",
        published=("Voita et al. 2019: the heads that matter (by pruning) are positional, "
                   "syntactic or rare-token heads; most others can go. Michel et al. 2019: most "
                   "heads can be masked at test time at small cost. Olsson et al. 2022: models "
                   "of 2+ layers form previous-token and induction heads."),
        base=base, variants={VARIANT: {}}, seeds=(0,),
        metrics=(BITS, "eval/accuracy", "train/loss"),
        expectations=(),
        suite="circuits",  # alone: see "A suite of its own" above
        analyses=(head_roles.make_analysis(roles),
                  head_importance.make_analysis("loss", by_cause)),
        amendments=(
            "ebb101f: the fingerprint holds the code that computes the judged values from this "
            "commit on (studies/measured_code.py, issue 63): it moved once for every study; no "
            "design of this study changed",
        ),
    )
