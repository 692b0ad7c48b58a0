"""The README's C++ example (examples/readme_example.cpp) as one Python call: strict verification of two
drafted tokens with the same addressed stream (seed 42, request 7, step 0), so it prints the same
tokens. Run with the package installed (pip install ./python)."""
import numpy as np

import specdec

q = np.array([[[0.1, 0.2, 0.6, 0.1], [0.7, 0.1, 0.1, 0.1]]], np.float32)  # [B, n, V]: the draft's rows
p = np.array([[[0.2, 0.2, 0.5, 0.1], [0.4, 0.3, 0.2, 0.1], [0.25] * 4]], np.float32)  # [B, n + 1, V]
r = specdec.verify(specdec.Strict(), np.array([[2, 0]]), q, p, seeds=42, request_ids=[7], steps=0)
print(f"accepted {int(r.num_accepted[0])} of 2 drafts; emitted: {' '.join(str(t) for t in r.emitted(0))}"
      f"  (valid: {'yes' if specdec.is_valid(r.status)[0] else 'no'}; backend {specdec.DEFAULT_BACKEND})")
