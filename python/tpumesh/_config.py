"""tpumesh.config: JAX's switches that change what tpumesh computes.

Only jax_threefry_partitionable so far: True (jax >= 0.5's default) or False
(jax < 0.5, the Flax notebooks' era), read by tpumesh.random and by
Pipeline.generate when no `impl` / `prng` is given.
"""


class _Config:
    def __init__(self):
        self.jax_threefry_partitionable = True

    def update(self, name, value):
        """As jax.config.update(name, value)."""
        if name != "jax_threefry_partitionable":
            raise ValueError(f"tpumesh.config has no option {name!r} (it has jax_threefry_partitionable)")
        if not isinstance(value, bool):
            raise ValueError(f"jax_threefry_partitionable takes True or False, not {value!r}")
        self.jax_threefry_partitionable = value

    def prng_impl(self):
        return "partitionable" if self.jax_threefry_partitionable else "original"


config = _Config()
