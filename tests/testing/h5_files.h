// HDF5 files as other writers make them, with the HDF5 C API: native IEEE
// half (h5py's np.float16), a 2-byte float of bfloat16's layout, an opaque
// 2-byte type (ml_dtypes' bfloat16 through h5py), external storage, a
// virtual dataset, a gzip-compressed chunked dataset, a chunked dataset with
// chunks never written. Each writes one dataset into a new file at `path`
// and returns false when HDF5 refused to make it.
#ifndef TPUMESH_TESTS_TESTING_H5_FILES_H_
#define TPUMESH_TESTS_TESTING_H5_FILES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "hdf5.h"

namespace tpumesh::testing {

// An HDF5 float type of `bytes` bytes with the given fields (little-endian).
inline hid_t FloatType(int bytes, size_t spos, size_t epos, size_t esize, size_t mpos, size_t msize, size_t ebias) {
  const hid_t t = H5Tcopy(bytes <= 4 ? H5T_IEEE_F32LE : H5T_IEEE_F64LE);
  H5Tset_fields(t, spos, epos, esize, mpos, msize);
  H5Tset_precision(t, static_cast<size_t>(8 * bytes));
  H5Tset_size(t, static_cast<size_t>(bytes));
  H5Tset_ebias(t, ebias);
  return t;
}
inline hid_t HalfType() { return FloatType(2, 15, 10, 5, 0, 10, 15); }
inline hid_t Bf16LayoutType() { return FloatType(2, 15, 7, 8, 0, 7, 127); }

// One dataset `name` of file type `ftype` over `dims` (with `dcpl`), its
// elements written from `data` as memory type `mtype` (nothing when null).
inline bool WriteH5(const std::string& path, const std::string& name, hid_t ftype, const std::vector<hsize_t>& dims,
                    hid_t mtype, const void* data, hid_t dcpl = H5P_DEFAULT) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0) return false;
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t ds = H5Dcreate2(f, name.c_str(), ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  bool ok = ds >= 0;
  if (ok && data != nullptr) ok = H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0;
  if (ds >= 0) H5Dclose(ds);
  H5Sclose(space);
  return H5Fclose(f) >= 0 && ok;
}

// IEEE half elements from their bits, as h5py writes np.float16.
inline bool WriteHalf(const std::string& path, const std::string& name, const std::vector<uint16_t>& bits) {
  const hid_t t = HalfType();
  const bool ok = WriteH5(path, name, t, {bits.size()}, t, bits.data());
  H5Tclose(t);
  return ok;
}

// Elements in bfloat16's layout (1-8-7) declared as an HDF5 float.
inline bool WriteBf16LayoutFloat(const std::string& path, const std::string& name, const std::vector<uint16_t>& bits) {
  const hid_t t = Bf16LayoutType();
  const bool ok = WriteH5(path, name, t, {bits.size()}, t, bits.data());
  H5Tclose(t);
  return ok;
}

// 2-byte opaque elements tagged as h5py tags numpy's void types.
inline bool WriteOpaque2(const std::string& path, const std::string& name, const std::vector<uint16_t>& bits) {
  const hid_t t = H5Tcreate(H5T_OPAQUE, 2);
  H5Tset_tag(t, "NUMPY:bfloat16");
  const bool ok = WriteH5(path, name, t, {bits.size()}, t, bits.data());
  H5Tclose(t);
  return ok;
}

// `n` f32 elements whose storage is the external file `target` (from byte 0).
inline bool WriteExternal(const std::string& path, const std::string& name, const std::string& target, hsize_t n) {
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_external(dcpl, target.c_str(), 0, n * 4);
  const bool ok = WriteH5(path, name, H5T_IEEE_F32LE, {n}, H5T_NATIVE_FLOAT, nullptr, dcpl);
  H5Pclose(dcpl);
  return ok;
}

// `n` f32 elements mapped from `source_file`:/data, which need not exist
// (HDF5 then gives the fill value).
inline bool WriteVirtual(const std::string& path, const std::string& name, const std::string& source_file, hsize_t n) {
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  const float fill = 7.0f;
  H5Pset_fill_value(dcpl, H5T_NATIVE_FLOAT, &fill);
  const hid_t vspace = H5Screate_simple(1, &n, nullptr), sspace = H5Screate_simple(1, &n, nullptr);
  H5Pset_virtual(dcpl, vspace, source_file.c_str(), "/data", sspace);
  const bool ok = WriteH5(path, name, H5T_IEEE_F32LE, {n}, H5T_NATIVE_FLOAT, nullptr, dcpl);
  H5Sclose(vspace);
  H5Sclose(sspace);
  H5Pclose(dcpl);
  return ok;
}

// f32 `values` in chunks of `chunk` elements, gzip level 9 (h5py's
// compression="gzip", shuffle optional).
inline bool WriteGzip(const std::string& path, const std::string& name, const std::vector<float>& values, hsize_t chunk,
                      bool shuffle = false) {
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 1, &chunk);
  if (shuffle) H5Pset_shuffle(dcpl);
  H5Pset_deflate(dcpl, 9);
  const bool ok = WriteH5(path, name, H5T_IEEE_F32LE, {values.size()}, H5T_NATIVE_FLOAT, values.data(), dcpl);
  H5Pclose(dcpl);
  return ok;
}

// `n` f32 elements in chunks of `chunk`, only the first chunk written: the
// others read as the fill value.
inline bool WritePartlyWrittenChunks(const std::string& path, const std::string& name, hsize_t n, hsize_t chunk) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0) return false;
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 1, &chunk);
  const hid_t space = H5Screate_simple(1, &n, nullptr);
  const hid_t ds = H5Dcreate2(f, name.c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  std::vector<float> first(chunk, 1.0f);
  const hsize_t start = 0;
  const hid_t mem = H5Screate_simple(1, &chunk, nullptr);
  H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, nullptr, &chunk, nullptr);
  const bool ok = ds >= 0 && H5Dwrite(ds, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, first.data()) >= 0;
  H5Sclose(mem);
  if (ds >= 0) H5Dclose(ds);
  H5Sclose(space);
  H5Pclose(dcpl);
  return H5Fclose(f) >= 0 && ok;
}

// The string attribute dtype=`value` on an existing dataset (as tpumesh and
// its Python module tag bfloat16 and bool).
inline bool AddDtypeAttribute(const std::string& path, const std::string& name, const std::string& value) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (f < 0) return false;
  const hid_t ds = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  const hid_t str = H5Tcopy(H5T_C_S1);
  H5Tset_size(str, value.size());
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t a = ds < 0 ? -1 : H5Acreate2(ds, "dtype", str, space, H5P_DEFAULT, H5P_DEFAULT);
  const bool ok = a >= 0 && H5Awrite(a, str, value.data()) >= 0;
  if (a >= 0) H5Aclose(a);
  H5Sclose(space);
  H5Tclose(str);
  if (ds >= 0) H5Dclose(ds);
  return H5Fclose(f) >= 0 && ok;
}

}  // namespace tpumesh::testing

#endif  // TPUMESH_TESTS_TESTING_H5_FILES_H_
