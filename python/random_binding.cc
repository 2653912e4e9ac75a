// tpumesh.random: JAX's threefry PRNG (mesh/prng.h) on raw keys, uint32[2]
// arrays as jax.random.key_data gives them, in either implementation
// ("partitionable": jax >= 0.5; "original": jax < 0.5).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bindings.h"
#include "mesh/prng.h"
#include "py_status.h"

namespace tpumesh::python {
namespace py = pybind11;
namespace {

using U32Array = py::array_t<uint32_t, py::array::c_style | py::array::forcecast>;

mesh::PrngImpl ParseImpl(const std::string& impl) {
  if (impl == "partitionable") return mesh::PrngImpl::kPartitionable;
  if (impl == "original") return mesh::PrngImpl::kOriginal;
  ThrowIfError(InvalidArgumentError("impl must be 'partitionable' (jax >= 0.5) or 'original' (jax < 0.5), not '" +
                                    impl + "'"));
  return mesh::PrngImpl::kPartitionable;
}

mesh::PrngKey KeyOf(const U32Array& key) {
  if (key.ndim() != 1 || key.shape(0) != 2)
    ThrowIfError(InvalidArgumentError("a key is uint32[2] (jax.random.key_data), got an array of " +
                                      std::to_string(key.size()) + " element(s) in " + std::to_string(key.ndim()) +
                                      " dimension(s)"));
  return {key.at(0), key.at(1)};
}

U32Array KeysArray(const std::vector<mesh::PrngKey>& keys, bool single) {
  U32Array out = single ? U32Array({py::ssize_t{2}}) : U32Array({static_cast<py::ssize_t>(keys.size()), py::ssize_t{2}});
  if (!keys.empty()) std::memcpy(out.mutable_data(), keys.data(), keys.size() * sizeof(mesh::PrngKey));
  return out;
}

// A draw of `shape` into a new array of T, computed with the GIL released.
template <typename T, typename Fill>
py::array_t<T> Draw(const std::vector<int64_t>& shape, mesh::PrngImpl impl, Fill fill) {
  ThrowIfError(mesh::CheckRandomShape(shape, impl));
  std::vector<py::ssize_t> dims(shape.begin(), shape.end());
  py::array_t<T> out(dims);
  T* p = out.mutable_data();
  {
    py::gil_scoped_release release;
    fill(p);
  }
  return out;
}

}  // namespace

void RegisterRandom(py::module_& m) {
  m.def("key_from_seed", [](uint64_t seed) { return KeysArray({mesh::KeyFromSeed(seed)}, true); });
  m.def("split", [](const U32Array& key, int num, const std::string& impl) {
    return KeysArray(ValueOrThrow(mesh::SplitChecked(KeyOf(key), num, ParseImpl(impl))), false);
  });
  m.def("fold_in", [](const U32Array& key, uint32_t data, const std::string& impl) {
    return KeysArray({mesh::FoldIn(KeyOf(key), data, ParseImpl(impl))}, true);
  });
  m.def("bits", [](const U32Array& key, const std::vector<int64_t>& shape, const std::string& impl) {
    const mesh::PrngKey k = KeyOf(key);
    const mesh::PrngImpl i = ParseImpl(impl);
    return Draw<uint32_t>(shape, i, [&](uint32_t* p) { mesh::RandomBits32(k, i, shape, p); });
  });
  m.def("uniform", [](const U32Array& key, const std::vector<int64_t>& shape, float minval, float maxval,
                      const std::string& impl) {
    const mesh::PrngKey k = KeyOf(key);
    const mesh::PrngImpl i = ParseImpl(impl);
    return Draw<float>(shape, i, [&](float* p) { mesh::Uniform(k, i, shape, minval, maxval, p); });
  });
  m.def("normal", [](const U32Array& key, const std::vector<int64_t>& shape, const std::string& impl) {
    const mesh::PrngKey k = KeyOf(key);
    const mesh::PrngImpl i = ParseImpl(impl);
    return Draw<float>(shape, i, [&](float* p) { mesh::Normal(k, i, shape, p); });
  });
}

}  // namespace tpumesh::python
