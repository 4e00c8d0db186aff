"""gradSim's control_cloth: find the initial velocity (one 3-vector) that makes a thrown cloth end up where a
target image shows it.

    python examples/control_cloth.py
"""

import numpy as np

from gradsim_jax import sysid
from gradsim_jax.scenes.demos import control_cloth

hidden, guess = np.array([1.2, 1.5, 0.3], np.float32), np.zeros(3, np.float32)
experiment = control_cloth(hidden, guess, size=48, frames=30)  # the camera sees both throws
_, target = sysid.simulate_video(experiment, {})

velocity, result = sysid.fit_control(experiment, target[-1], guess, iterations=150, learning_rate=0.15)
errors = sysid.final_position_error(experiment, velocity, hidden)
print(f"velocity {np.round(velocity, 3)} (hidden {hidden}); final position error "
      f"{errors['center_error_m'] * 1000:.1f} mm over a {errors['travel_m']:.2f} m throw")
