"""Mutation check: a deliberate one-term error in each summary/solver/view-count formula must fail a test.

    python scripts/mutation_check.py            # every mutation
    python scripts/mutation_check.py -k merge   # those whose name contains "merge"
    python scripts/mutation_check.py --list

Each mutation is applied, one at a time, by exact string replacement to a
temporary copy of the package and its tests; the tests run against that copy
(``pytest -x``, first failure stops). A mutation is "caught" when pytest
fails. The script first checks that the unmutated copy passes, and exits 1
if any mutation survives.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ["tests/test_stats.py", "tests/test_solvers.py", "tests/test_numbers.py",
         "tests/test_properties.py", "tests/test_estimator.py", "tests/test_wide.py",
         "tests/test_view.py"]

# (name, file, exact text, replacement): each a one-term error in one formula.
MUTATIONS = [
    # ---- pass 1: one chunk's summary
    ("chunk: drop the class-mean correction", "streamproj/stats.py",
     "_add_low_rank(within, p, sums.T / -counts, sums)",
     "_add_low_rank(within, p, sums.T / counts, sums)"),
    ("chunk: class means divide by n+1", "streamproj/stats.py",
     "_two_sum(shifts, sums / counts[:, None])", "_two_sum(shifts, sums / (counts[:, None] + 1))"),
    ("chunk: per-class shift is zero", "streamproj/stats.py",
     "shifts[new] = sums[new] / counts[new, None]", "shifts[new] = 0.0 * sums[new] / counts[new, None]"),
    ("chunk: always one shared shift", "streamproj/stats.py",
     "<= _SHARED_SHIFT_SPREADS * spread", "<= 1e30 * spread"),
    ("chunk: gathered shift added, not subtracted", "streamproj/stats.py",
     "subtract_rows(_cast_rows(X[start:stop], decode), shifted, out=shifted, exact=exact)",
     "np.add(_cast_rows(X[start:stop], decode), shifted, out=shifted)"),
    ("chunk: per-class residual of the mean", "streamproj/stats.py",
     "residuals[k] = residual / counts[k]", "residuals[k] = residual / (counts[k] + 1)"),
    ("chunk: per-class scatter drops the rounding term", "streamproj/stats.py",
     "m2[k] = d.T @ d - np.outer(residual, residual) / counts[k]", "m2[k] = d.T @ d"),
    ("chunk: co-moments about the rounded class mean", "streamproj/stats.py",
     "            d -= residuals[k]\n", ""),
    ("chunk: fourth co-moment", "streamproj/stats.py",
     "m22[k] = d2.T @ d2", "m22[k] = d2.T @ d"),
    # ---- merges (Chan-Golub-LeVeque) and derived moments
    ("merge: drop the mean residuals from delta", "streamproj/stats.py",
     "delta = (mub - mua) + (lob - loa)", "delta = (mub - mua)"),
    ("merge: mean step weighted by n_a", "streamproj/stats.py",
     "loa + delta * (nb / safe_n)[:, None]", "loa + delta * (na / safe_n)[:, None]"),
    ("merge: weight n_a n_b / (n+1)", "streamproj/stats.py",
     "na * (nb / safe_n), 0.0)", "na * (nb / (safe_n + 1)), 0.0)"),
    ("merge: drop the between-halves term", "streamproj/stats.py",
     "left = (delta * weight[:, None]).T", "left = 0.0 * delta.T"),
    ("merge of pass-1 partials: the second part's scatter halved", "streamproj/stats.py",
     "            mine += theirs", "            mine += 0.5 * theirs"),
    ("merge of pass-1 partials: class moments not re-centred", "streamproj/stats.py",
     "_shift_moments_in_place(n_side, m2, m21, m22, e)",
     "_shift_moments_in_place(n_side, m2, m21, m22, 0.0 * e)"),
    ("merge of pass-1 partials: the second part's co-moments dropped", "streamproj/stats.py",
     "                into += added", "                into += 0.0 * added"),
    ("wide chunk: class sums read one column off", "streamproj/stats.py",
     "out[:, c - c0] = self.panel(k)[:rows, c - self.bounds[k][0]]",
     "out[:, c - c0] = self.panel(k)[:rows, c - self.bounds[k][0] - 1]"),
    ("shift moments: M2 sign", "streamproj/stats.py",
     "    m2 += np.multiply(n * ea, eb, out=tmp)", "    m2 -= np.multiply(n * ea, eb, out=tmp)"),
    ("shift moments: M21 cross term", "streamproj/stats.py",
     "m21 += np.multiply(2.0 * ea, m2, out=tmp)", "m21 += np.multiply(1.0 * ea, m2, out=tmp)"),
    ("shift moments: M22 cross term", "streamproj/stats.py",
     "np.multiply(4.0 * ea, eb, out=tmp)", "np.multiply(2.0 * ea, eb, out=tmp)"),
    ("overall mean weights", "streamproj/stats.py",
     "(self.counts / self.n_samples) @ self.deviations(anchor)",
     "(self.counts / (self.n_samples + 1)) @ self.deviations(anchor)"),
    ("between scatter weights", "streamproj/stats.py",
     "_symmetric((dev * self.counts[:, None]).T @ dev)",
     "_symmetric((dev * (self.counts[:, None] - 1)).T @ dev)"),
    ("class covariances ddof", "streamproj/stats.py",
     "self.class_scatter / (self.counts - ddof)", "self.class_scatter / (self.counts + ddof)"),
    # ---- solvers
    ("covariance: pooled divides by n-1", "streamproj/solvers.py",
     "cov = stats.within / stats.n_samples", "cov = stats.within / (stats.n_samples - 1)"),
    ("shrinkage: target trace / (p+1)", "streamproj/solvers.py",
     "out[np.diag_indices(p)] += shrinkage * np.trace(cov) / p",
     "out[np.diag_indices(p)] += shrinkage * np.trace(cov) / (p + 1)"),
    ("OAS: denominator n+2", "streamproj/solvers.py",
     "den = (n + 1) * (alpha - mu**2 / p)", "den = (n + 2) * (alpha - mu**2 / p)"),
    ("Ledoit-Wolf: beta over p(n-1)", "streamproj/solvers.py",
     "beta = (beta_ / n - delta_) / (p * n)", "beta = (beta_ / n - delta_) / (p * (n - 1))"),
    ("singularity decided on cov, not its correlation form", "streamproj/solvers.py",
     "evals = linalg.eigvalsh(corr, overwrite_a=True)", "evals = linalg.eigvalsh(cov.copy(), overwrite_a=True)"),
    ("singularity bounds: the eigenvalue bound is 1/sqrt(trace(corr⁻¹))", "streamproj/solvers.py",
     "return 1.0 / trace > _CERTAIN_MARGIN", "return 1.0 / np.sqrt(trace) > _CERTAIN_MARGIN"),
    ("singularity bounds: the inverse's triangle offset by +j0", "streamproj/solvers.py",
     "np.triu(inverse[:j1, j0:j1], -j0)", "np.triu(inverse[:j1, j0:j1], j0)"),
    ("scaled solve multiplies by the scale", "streamproj/solvers.py",
     "return linalg.cho_solve(factor, rhs / d) / d", "return linalg.cho_solve(factor, rhs / d) * d"),
    ("LDA two classes: mean difference sign", "streamproj/solvers.py",
     "diff = dev[1] - dev[0]", "diff = dev[1] + dev[0]"),
    ("LDA two classes: intercept log-prior sign", "streamproj/solvers.py",
     "np.array([-coef[0] @ (0.5 * (means[0] + means[1])) + log_ratio])",
     "np.array([-coef[0] @ (0.5 * (means[0] + means[1])) - log_ratio])"),
    ("LDA two classes: decision at the mean", "streamproj/solvers.py",
     "(stats.counts[1] / stats.n_samples - 0.5)", "(stats.counts[0] / stats.n_samples - 0.5)"),
    ("LDA K>2: intercept quadratic term", "streamproj/solvers.py",
     'intercept = -0.5 * np.einsum("kp,kp->k", means, coef) + log_pri',
     'intercept = -1.0 * np.einsum("kp,kp->k", means, coef) + log_pri'),
    ("LDA K>2: centred offset quadratic term", "streamproj/solvers.py",
     'centred_offset = -0.5 * np.einsum("kp,kp->k", dev_m, centred_coef) + log_pri',
     'centred_offset = -1.0 * np.einsum("kp,kp->k", dev_m, centred_coef) + log_pri'),
    ("LDA K>2: centred offset drops the log prior", "streamproj/solvers.py",
     'centred_offset = -0.5 * np.einsum("kp,kp->k", dev_m, centred_coef) + log_pri',
     'centred_offset = -0.5 * np.einsum("kp,kp->k", dev_m, centred_coef)'),
    ("LDA K>2: decision at the mean", "streamproj/solvers.py",
     "at_mean = 0.5 * (center @ _scaled_solve(scale, factor, center)) + centred_offset",
     "at_mean = 1.0 * (center @ _scaled_solve(scale, factor, center)) + centred_offset"),
    ("LDA K>2: the between covariance as total minus within", "streamproj/solvers.py",
     "    between = stats.between / stats.n_samples\n",
     "    between = total_covariance(stats, None) - stats.within / stats.n_samples\n"),
    ("LDA K>2: the axes from scikit-learn's scalings", "streamproj/solvers.py",
     "    directions = _boundary_directions(stats, cov, centred_coef)",
     "    directions = evecs[:, order[: stats.n_classes - 1]]"),
    ("LDA K>2: eigenvectors back from the scaled basis", "streamproj/solvers.py",
     "evecs = evecs / scale[:, None]", "evecs = evecs * scale[:, None]"),
    ("external K>2: centred offset sign", "streamproj/solvers.py",
     "offset = intercept + coef @ center", "offset = intercept - coef @ center"),
    ("QDA: regularisation weight", "streamproj/solvers.py",
     "cov = (1.0 - reg_param) * covs[k] + reg_param * np.eye(p)",
     "cov = (1.0 + reg_param) * covs[k] + reg_param * np.eye(p)"),
    ("QDA: whitening multiplies by the scale", "streamproj/solvers.py",
     "np.eye(p)) / scale[:, None]", "np.eye(p)) * scale[:, None]"),
    ("QDA: log determinant halved", "streamproj/solvers.py",
     "log_det[k] = 2.0 * (np.log(scale).sum()", "log_det[k] = 1.0 * (np.log(scale).sum()"),
    ("projection centre: mean moved the wrong way", "streamproj/solvers.py",
     "c = mu - distance * w", "c = mu + distance * w"),
    ("hyperplane centring: drop n(mu-x0)(mu-x0)^T", "streamproj/solvers.py",
     "return x0, stats.total, (mu - (w @ mu) * w, float(stats.n_samples))",
     "return x0, stats.total, None"),
    ("hyperplane centring: the spike's deflation drops the coupling", "streamproj/solvers.py",
     "T = B - np.outer(r, r) / (a - mu)", "T = B"),
    ("LDA: the float64 mean's rounding ignored (K > 2)", "streamproj/solvers.py",
     "dev_m = dev - rounding", "dev_m = dev"),
    ("LDA: the float64 mean's rounding ignored (two classes)", "streamproj/solvers.py",
     "+ log_ratio + coef[0] @ rounding])", "+ log_ratio])"),
    ("boundary-parallel axes: drop the scatter", "streamproj/solvers.py",
     "reduced = complement.T @ scatter @ complement", "reduced = complement.T @ complement"),
    ("reconstruction error: centre sign", "streamproj/solvers.py",
     "dev = stats.mean - center\n    S = stats.total", "dev = stats.mean + center\n    S = stats.total"),
    ("reconstruction error: drop the centre's own residual", "streamproj/solvers.py",
     "return float(lost + stats.n_samples * (rest @ rest))", "return float(lost)"),
    ("estimator: distance of the mean scaled by |coef|", "streamproj/estimator.py",
     "mean_distance = result.mean_decision[0] / np.linalg.norm(coef)",
     "mean_distance = result.mean_decision[0] * np.linalg.norm(coef)"),
    # ---- the interactive view's counts
    ("view: a coarser level adds the wrong columns", "streamproj/view/pyramid.py",
     "c = c[:, :, 0::2] + c[:, :, 1::2]", "c = c[:, :, : c.shape[2] // 2] + c[:, :, c.shape[2] // 2 :]"),
    ("view: the colour scale's top counts hidden classes", "streamproj/view/view.js",
     "          if (hidden[k]) continue;", "          if (hidden[k] && false) continue;"),
    ("view: the colour scale's top is not the view's", "streamproj/view/view.js",
     "        if (t > vmax) vmax = t;", "        if (t > vmax) vmax = 2 * t;"),
    ("view: a thin cloud's cells stay square", "streamproj/view/pyramid.py",
     "cell[a] = square / 2.0 ** np.floor(np.log2(finer))", "cell[a] = square"),
]


def copy_tree(dest):
    for name in ("streamproj", "tests"):
        shutil.copytree(ROOT / name, dest / name,
                        ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")


def run_tests(folder, tests, timeout):
    env = {**os.environ, "PYTHONPATH": str(folder), "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    try:
        proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    lines = [line for line in proc.stdout.splitlines() if line.startswith("FAILED")]
    return proc.returncode, (lines[0] if lines else proc.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="only mutations whose name contains this")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if args.k.lower() in m[0].lower()]
    if args.list:
        for name, path, *_ in chosen:
            print(f"{path}: {name}")
        return 0
    with tempfile.TemporaryDirectory(prefix="streamproj-mutants-") as tmp:
        folder = Path(tmp)
        copy_tree(folder)
        rc, last = run_tests(folder, TESTS, args.timeout)
        if rc != 0:
            print(f"the unmutated tests do not pass ({last}); fix them first")
            return 2
        survived = []
        for name, path, old, new in chosen:
            target = folder / path
            original = target.read_text()
            if original.count(old) != 1:
                print(f"?? {name}: the text to mutate occurs {original.count(old)} times in {path}")
                survived.append(name)
                continue
            target.write_text(original.replace(old, new))
            start = time.perf_counter()
            try:
                rc, last = run_tests(folder, TESTS, args.timeout)
            finally:
                target.write_text(original)
            caught = rc not in (0, None)
            if not caught:
                survived.append(name)
            verdict = "caught  " if caught else "SURVIVED"
            print(f"{verdict} {name:58s} {time.perf_counter() - start:5.1f} s  {last[:100]}",
                  flush=True)
    print(f"\n{len(chosen) - len(survived)} of {len(chosen)} mutations caught")
    for name in survived:
        print(f"  survived: {name}")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
