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

mesh::PrngImpl ParseImpl(const std::string& impl) {
  if (impl == "partitionable") return mesh::PrngImpl::kPartitionable;
  if (impl == "original") return mesh::PrngImpl::kOriginal;
  ThrowIfError(InvalidArgumentError("impl must be 'partitionable' (jax >= 0.5) or 'original' (jax < 0.5), not '" +
                                    impl + "'"));
  return mesh::PrngImpl::kPartitionable;
}

mesh::PrngKey KeyOf(const py::object& array) {
  const pipeline::H5Raw key = ValueOrThrow(RawAs(array, "uint32"));
  if (key.dims.size() != 1 || key.dims[0] != 2)
    ThrowIfError(InvalidArgumentError("a key is uint32[2] (jax.random.key_data), got an array of " +
                                      std::to_string(key.data.size() / 4) + " element(s) in " +
                                      std::to_string(key.dims.size()) + " dimension(s)"));
  mesh::PrngKey k;
  static_assert(sizeof(k) == 8);
  std::memcpy(&k, key.data.data(), sizeof(k));  // a raw is little-endian, as the library's hosts are
  return k;
}

py::object KeysArray(const std::vector<mesh::PrngKey>& keys, bool single) {
  std::vector<int64_t> dims{static_cast<int64_t>(keys.size()), 2};
  if (single) dims.erase(dims.begin());
  return NewArray("=u4", dims, [&keys](uint8_t* p, size_t n) { std::memcpy(p, keys.data(), n); });
}

// A draw of `shape` into a new array of T ("=u4" or "=f4"), computed with
// the GIL released.
template <typename T, typename Fill>
py::object Draw(const char* dtype, const std::vector<int64_t>& shape, mesh::PrngImpl impl, Fill fill) {
  ThrowIfError(mesh::CheckRandomShape(shape, impl));
  return NewArray(dtype, shape, [&fill](uint8_t* p, size_t) {
    py::gil_scoped_release release;
    fill(reinterpret_cast<T*>(p));
  });
}

}  // namespace

void RegisterRandom(py::module_& m) {
  m.def("key_from_seed", [](uint64_t seed) { return KeysArray({mesh::KeyFromSeed(seed)}, true); });
  m.def("split", [](const py::object& key, int num, const std::string& impl) {
    return KeysArray(ValueOrThrow(mesh::SplitChecked(KeyOf(key), num, ParseImpl(impl))), false);
  });
  m.def("fold_in", [](const py::object& key, uint32_t data, const std::string& impl) {
    return KeysArray({mesh::FoldIn(KeyOf(key), data, ParseImpl(impl))}, true);
  });
  m.def("bits", [](const py::object& key, const std::vector<int64_t>& shape, const std::string& impl) {
    const mesh::PrngKey k = KeyOf(key);
    const mesh::PrngImpl i = ParseImpl(impl);
    return Draw<uint32_t>("=u4", shape, i, [&](uint32_t* p) { mesh::RandomBits32(k, i, shape, p); });
  });
  m.def("uniform", [](const py::object& key, const std::vector<int64_t>& shape, float minval, float maxval,
                      const std::string& impl) {
    const mesh::PrngKey k = KeyOf(key);
    const mesh::PrngImpl i = ParseImpl(impl);
    return Draw<float>("=f4", shape, i, [&](float* p) { mesh::Uniform(k, i, shape, minval, maxval, p); });
  });
  m.def("normal", [](const py::object& key, const std::vector<int64_t>& shape, const std::string& impl) {
    const mesh::PrngKey k = KeyOf(key);
    const mesh::PrngImpl i = ParseImpl(impl);
    return Draw<float>("=f4", shape, i, [&](float* p) { mesh::Normal(k, i, shape, p); });
  });
}

}  // namespace tpumesh::python
