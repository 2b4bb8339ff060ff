"""Record rliable 1.2.0's numbers for the fixed score matrix of tests/tools/test_rlops.py (the cross-check of rlstats).

rliable is not a dependency: run this in a throwaway venv, as the numbers in the test were made:

    python3 -m venv /tmp/rliable_venv && /tmp/rliable_venv/bin/pip install rliable==1.2.0 "pandas<3"
    /tmp/rliable_venv/bin/python -m benchmark.studies.rlops_rliable_record

(arch, which rliable uses, fails to import with pandas 3.)
"""

import numpy as np
from rliable import library as rly
from rliable import metrics

# runs x tasks, as rliable takes them
X = np.array(
    [
        [0.92, 0.41, 1.35],
        [0.77, 0.58, 1.02],
        [1.10, 0.36, 0.88],
        [0.65, 0.72, 1.21],
        [0.83, 0.49, 0.97],
    ]
)
Y = np.array(
    [
        [0.71, 0.52, 0.90],
        [0.88, 0.30, 0.79],
        [0.60, 0.44, 1.05],
        [0.95, 0.39, 0.68],
        [0.54, 0.61, 0.83],
    ]
)
np.random.seed(0)
funcs = {
    "iqm": metrics.aggregate_iqm,
    "median": metrics.aggregate_median,
    "mean": metrics.aggregate_mean,
    "optimality_gap": metrics.aggregate_optimality_gap,
}
for name, f in funcs.items():
    point, ci = rly.get_interval_estimates({"x": X}, lambda s, f=f: np.array([f(s)]), reps=200000)
    print(name, repr(float(point["x"][0])), [round(float(v), 4) for v in ci["x"][:, 0]])
point, ci = rly.get_interval_estimates({"x,y": (X, Y)}, metrics.probability_of_improvement, reps=200000)
print("poi", repr(float(point["x,y"])), [round(float(v), 4) for v in np.ravel(ci["x,y"])])
