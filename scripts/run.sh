#!/usr/bin/env bash
# The main job: the six main-suite ablation studies at their default size (2-core CPU sized), on
# synthetic data the project generates itself. Creates .venv (repo root) when missing.
#   scripts/run.sh [WORKDIR] [extra sweep flags, e.g. --size=large --jobs=1]
#   scripts/run.sh --suite=NAME [WORKDIR] [flags]   # another suite; NAME is one of
#     main             the studies on generated data
#     lm               the real-text studies (tiny Shakespeare)
#     depth_sweep      2 to 24 layers, each architecture, to the plateau
#     depth_deepest    96 layers at width 16, each architecture at its best rate
#     depth_remedies_pre  24 layers, Pre-LN, each remedy, tuned
#     depth_remedies_post  24 layers, Post-LN, each remedy, tuned
#     depth_remedies_nonorm  24 layers, residuals without a norm, each remedy, tuned
#     depth_remedies_noresidual  24 layers, Pre-LN without residuals, each remedy, tuned
#     depth_article_pre  96 layers, Pre-LN, tuned
#     depth_article_post  96 layers, Post-LN under DeepNet's init, tuned
#     depth_article_nonorm  96 layers, residuals without a norm, each init, tuned
#     softmax_plateau_narrow  ÷√d_k at the plateau, d_k 64, each arm tuned
#     softmax_plateau_wide  ÷√d_k at the plateau, d_k 256, each arm tuned
#     lm_head_dim      ÷√d_k, d_k alone at one head, real text
#     components       BatchNorm, heads, softmax gradient, residual-stream range
#     induction        induction heads: one layer against two that compose
#     induction_matched  induction heads against matched random heads
#     mechanisms       causal mask, residual gradients, BatchNorm on text
#     precision        bfloat16 products in a character LM
#     circuits         a larger character LM's heads, by knock-out
#     all              every study, whatever its suite
# (the suites as transformer_jax/studies/design/catalog.py declares them:
# tests/studies/test_suites.py).
# --suite may stand anywhere; WORKDIR is the first other argument when it is not a flag, by
# default runs/studies (main) or runs/<suite>_studies.
# The text of the real-text studies (lm, lm_head_dim, mechanisms, precision, circuits):
# --text_path=FILE (a sweep flag; '' = the TFDS dataset), else $TJ_SHAKESPEARE, else
# ../shared/data/tinyshakespeare.txt if present, else the TFDS dataset (downloaded once).
# Re-running skips finished runs and resumes interrupted ones. Two worker processes train two
# variants at once (one per core of a 2-core CPU); later flags override --jobs.
source "$(dirname "$0")/_venv.sh" ""
SUITE=main
ARGS=()
while (($#)); do
    case "$1" in
        --suite=*) SUITE="${1#--suite=}" ;;
        --suite) SUITE="${2-}"; shift ;;
        *) ARGS+=("$1") ;;
    esac
    shift
done
if ((${#ARGS[@]})) && [[ "${ARGS[0]}" != -* ]]; then
    WORKDIR="${ARGS[0]}"
    ARGS=("${ARGS[@]:1}")
elif [[ "$SUITE" == main ]]; then
    WORKDIR=runs/studies
else
    WORKDIR="runs/${SUITE}_studies"
fi
python -m transformer_jax.sweep --experiment=experiments/ --workdir="$WORKDIR" --jobs=2 \
    --suite="$SUITE" "${ARGS[@]}"
