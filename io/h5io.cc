#include "io/h5io.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include "base/input_file.h"
#include "hdf5.h"
#include "io/atomic_file.h"
#include "io/h5_dataset.h"
#include "kernels/bf16.h"

namespace tpumesh::pipeline {
namespace {

struct File {
  hid_t id = -1;
  ~File() {
    if (id >= 0) H5Fclose(id);
  }
};

// "FILE: dataset 'NAME'", as every message names them.
std::string Where(const std::string& file, const std::string& name) { return file + ": dataset '" + name + "'"; }

StatusOr<hid_t> OpenDataset(const std::string& file, const std::string& name, File& f) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  TPUMESH_RETURN_IF_ERROR(CheckInputFile(file).status());
  if (H5Fis_hdf5(file.c_str()) <= 0) return InvalidArgumentError(file + ": not an HDF5 file");
  f.id = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f.id < 0) return InvalidArgumentError(file + ": cannot open (corrupt?)");
  return OpenDatasetForReading(f.id, name, Where(file, name), file + ": no dataset '" + name + "'");
}

// What a dataset declares against what the file holds for it, before
// anything is allocated: a tiny file that declares a huge shape (truncated,
// never written, or hostile) is refused instead of allocating it or reading
// the fill value. Up to 2^31 values, and no more bytes than its storage
// holds (decompressed, for a gzip-compressed dataset: H5HeldBytes).
Status CheckDeclaredSize(const std::string& file, const std::string& name, hid_t ds, hid_t space, hid_t type) {
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  const double bytes = static_cast<double>(n) * static_cast<double>(std::max<size_t>(H5Tget_size(type), 1));
  const double stored = static_cast<double>(H5Dget_storage_size(ds));
  const double held = H5HeldBytes(ds);
  if (n < 0 || n > (hssize_t{1} << 31) || bytes > held) {
    const std::string decoded =
        H5Filtered(ds) ? " (" + std::to_string(static_cast<int64_t>(held)) + " decompressed)" : "";
    return InvalidArgumentError(Where(file, name) + " declares " + std::to_string(n) + " values but stores " +
                                std::to_string(static_cast<int64_t>(stored)) + " bytes" + decoded +
                                " (truncated or not made by a writer of this data?)");
  }
  return OkStatus();
}

// The dtype attribute ("bfloat16", "float16", "bool") against what the
// dataset holds: a tag is believed only of elements it can describe (a
// native half tagged bfloat16 would have its bits read as bf16).
Status CheckTag(const std::string& file, const std::string& name, hid_t type, const H5Element& el,
                const std::string& tag) {
  const bool integer = el.cls == 'i' || el.cls == 'u';
  bool fits = true;
  if (tag == "bfloat16") fits = integer && el.width == 2;
  else if (tag == "float16") fits = el.width == 2 && (integer || el.cls == 'f');
  else if (tag == "bool") fits = el.width == 1 && el.cls != 'f';
  if (fits) return OkStatus();
  return InvalidArgumentError(Where(file, name) + " holds " + DescribeH5Type(type) + " but its dtype attribute says " +
                              tag + " (bfloat16 is stored as uint16 with dtype=\"bfloat16\", float16 as IEEE half or "
                              "uint16 with dtype=\"float16\", bool as uint8 with dtype=\"bool\")");
}

// h5py's layout of numpy's complex64 (width 8) and complex128 (16): a
// compound of IEEE little-endian floats r at offset 0 and i at width / 2.
// The caller closes it.
hid_t ComplexType(int width) {
  const size_t half = static_cast<size_t>(width) / 2;
  const hid_t part = half == 4 ? H5T_IEEE_F32LE : H5T_IEEE_F64LE;
  const hid_t t = H5Tcreate(H5T_COMPOUND, static_cast<size_t>(width));
  H5Tinsert(t, "r", 0, part);
  H5Tinsert(t, "i", half, part);
  return t;
}

// IEEE half, little-endian, as h5py writes np.float16 (HDF5 1.10 has no
// predefined half): sign bit 15, 5 exponent bits at 10 with bias 15, 10
// mantissa bits. The caller closes it.
hid_t HalfType() {
  const hid_t t = H5Tcopy(H5T_IEEE_F32LE);
  H5Tset_fields(t, 15, 10, 5, 0, 10);
  H5Tset_size(t, 2);
  H5Tset_ebias(t, 15);
  return t;
}

}  // namespace

bool H5HasDataset(const std::string& file, const std::string& name) {
  File f;
  auto ds = OpenDataset(file, name, f);
  if (!ds.ok()) return false;
  H5Dclose(*ds);
  return true;
}

StatusOr<mesh::Array> H5ReadArray(const std::string& file, const std::string& name) {
  File f;
  TPUMESH_ASSIGN_OR_RETURN(hid_t ds, OpenDataset(file, name, f));
  hid_t space = H5Dget_space(ds), type = H5Dget_type(ds);
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(std::max(rank, 0));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  mesh::Shape shape(dims.begin(), dims.end());
  const size_t n = static_cast<size_t>(std::max<hssize_t>(H5Sget_simple_extent_npoints(space), 0));
  StatusOr<H5Element> el = ClassifyElements(type, Where(file, name));
  const std::string tag = ReadShortStringAttribute(ds, "dtype");
  StatusOr<mesh::Array> out = DataLossError(file + ": cannot read '" + name + "'");
  if (!el.ok()) {
    out = el.status();
  } else if (Status st = CheckTag(file, name, type, *el, tag); !st.ok()) {
    out = st;
  } else if (Status st = CheckDeclaredSize(file, name, ds, space, type); !st.ok()) {
    out = st;
  } else if (el->cls == 'c') {
    out = InvalidArgumentError(Where(file, name) + " holds complex numbers; this input takes real f32 or integer arrays");
  } else if (el->cls == 'f') {
    mesh::Array a = mesh::Array::Host(mesh::DType::kF32, shape);
    if (H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, a.mutable_raw()) >= 0) out = a;
  } else if (el->width == 2 && (tag == "bfloat16" || tag == "float16")) {
    // 16-bit floats kept as uint16: their values, as f32 (exact).
    std::vector<uint16_t> bits(n);
    if (H5Dread(ds, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, bits.data()) >= 0) {
      mesh::Array a = mesh::Array::Host(mesh::DType::kF32, shape);
      float* p = a.mutable_data<float>();
      for (size_t i = 0; i < n; ++i) {
        if (tag == "float16") {
          p[i] = kernels::HalfToFloat(bits[i]);
        } else {
          const uint32_t w = static_cast<uint32_t>(bits[i]) << 16;
          std::memcpy(&p[i], &w, 4);
        }
      }
      out = a;
    }
  } else {
    std::vector<int64_t> tmp(n);
    std::vector<uint8_t> flags(el->cls == 'b' ? n : 0);
    const herr_t rc = el->cls == 'b' ? H5Dread(ds, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, flags.data())
                                     : H5Dread(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, tmp.data());
    for (size_t i = 0; i < flags.size(); ++i) tmp[i] = flags[i];
    if (rc >= 0) {
      mesh::Array a = mesh::Array::Host(mesh::DType::kI32, shape);
      out = a;
      for (size_t i = 0; i < tmp.size(); ++i) {
        if (tmp[i] < std::numeric_limits<int32_t>::min() || tmp[i] > std::numeric_limits<int32_t>::max()) {
          out = InvalidArgumentError(file + ": '" + name + "' holds " + std::to_string(tmp[i]) +
                                     ", outside int32");
          break;
        }
        a.mutable_data<int32_t>()[i] = static_cast<int32_t>(tmp[i]);
      }
    }
  }
  H5Tclose(type);
  H5Sclose(space);
  H5Dclose(ds);
  return out;
}

StatusOr<std::vector<std::string>> H5ReadStrings(const std::string& file, const std::string& name) {
  File f;
  TPUMESH_ASSIGN_OR_RETURN(hid_t ds, OpenDataset(file, name, f));
  hid_t type = H5Dget_type(ds), space = H5Dget_space(ds);
  StatusOr<std::vector<std::string>> out = InvalidArgumentError(file + ": dataset '" + name + "' is not strings");
  if (Status st = CheckDeclaredSize(file, name, ds, space, type); !st.ok()) {
    out = st;
  } else if (const int rank = H5Sget_simple_extent_ndims(space); rank > 1) {
    // A list of strings is one row: a table would be read flat, its shape lost.
    std::vector<hsize_t> dims(rank);
    H5Sget_simple_extent_dims(space, dims.data(), nullptr);
    std::string shape;
    for (const hsize_t d : dims) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    out = InvalidArgumentError(file + ": dataset '" + name + "' has shape [" + shape +
                               "]; a list of strings is one-dimensional, [N]");
  } else if (H5Tget_class(type) == H5T_STRING) {
    const hssize_t n = H5Sget_simple_extent_npoints(space);
    std::vector<std::string> v;
    hid_t mtype = H5Tcopy(H5T_C_S1);
    H5Tset_cset(mtype, H5Tget_cset(type));
    if (H5Tis_variable_str(type) > 0) {
      H5Tset_size(mtype, H5T_VARIABLE);
      std::vector<char*> ptrs(n, nullptr);
      if (H5Dread(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()) >= 0) {
        for (char* p : ptrs) v.emplace_back(p ? p : "");
        H5Dvlen_reclaim(mtype, space, H5P_DEFAULT, ptrs.data());
        out = v;
      }
    } else {
      const size_t len = H5Tget_size(type);
      H5Tset_size(mtype, len);
      std::vector<char> buf(n * len);
      if (H5Dread(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) >= 0) {
        for (hssize_t i = 0; i < n; ++i) v.emplace_back(buf.data() + i * len, strnlen(buf.data() + i * len, len));
        out = v;
      }
    }
    H5Tclose(mtype);
  }
  H5Sclose(space);
  H5Tclose(type);
  H5Dclose(ds);
  return out;
}

namespace {

// Dataset creation without the modification time HDF5 stamps by default:
// the same outputs are the same bytes, whenever (and on whichever rank)
// they are written.
hid_t UntimedDatasets() {
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_obj_track_times(dcpl, 0);
  return dcpl;
}

}  // namespace

StatusOr<std::unique_ptr<H5Writer>> H5Writer::Create(const std::string& path) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  // Checked now, so that an unwritable output fails before any compute.
  TPUMESH_RETURN_IF_ERROR(CheckWritable(path));
  std::unique_ptr<H5Writer> w(new H5Writer());
  w->path_ = path;
  // In memory (the core driver without a backing store): HDF5 never writes
  // to disk, so no flush or close of it can fail half-way; Commit writes the
  // finished image with checked, fsync'ed writes.
  const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_core(fapl, 1 << 20, /*backing_store=*/0);
  w->file_ = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  H5Pclose(fapl);
  if (w->file_ < 0) return InternalError(path + ": cannot create an HDF5 file in memory");
  return w;
}

H5Writer::~H5Writer() {
  if (file_ >= 0) H5Fclose(file_);
}

Status H5Writer::Write(const std::string& name, const mesh::Array& a) {
  std::vector<hsize_t> dims(a.shape().begin(), a.shape().end());
  hid_t space = dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const bool f32 = a.dtype() == mesh::DType::kF32;
  if (!f32 && a.dtype() != mesh::DType::kI32) {
    H5Sclose(space);
    return InvalidArgumentError(name + ": only f32 and int32 arrays are written");
  }
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  hid_t dcpl = UntimedDatasets();
  hid_t ds = H5Dcreate2(file_, name.c_str(), f32 ? H5T_IEEE_F32LE : H5T_STD_I32LE, space, lcpl, dcpl, H5P_DEFAULT);
  H5Pclose(dcpl);
  H5Pclose(lcpl);
  H5Sclose(space);
  if (ds < 0) return InternalError(path_ + ": cannot create dataset " + name);
  const herr_t rc = H5Dwrite(ds, f32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, a.raw());
  const herr_t closed = H5Dclose(ds);
  if (rc < 0 || closed < 0) return InternalError(path_ + ": cannot write " + name + " into the HDF5 image");
  return OkStatus();
}

StatusOr<H5Raw> H5ReadRaw(const std::string& file, const std::string& name) {
  File f;
  TPUMESH_ASSIGN_OR_RETURN(hid_t ds, OpenDataset(file, name, f));
  hid_t space = H5Dget_space(ds), type = H5Dget_type(ds), mem = -1;
  auto close = [&] {
    if (mem >= 0) H5Tclose(mem);
    H5Tclose(type);
    H5Sclose(space);
    H5Dclose(ds);
  };
  H5Raw r;
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 0 || rank > 16) {
    close();
    return InvalidArgumentError(Where(file, name) + " has an unsupported rank");
  }
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  r.dims.assign(dims.begin(), dims.end());
  StatusOr<H5Element> el = ClassifyElements(type, Where(file, name));
  r.dtype = ReadShortStringAttribute(ds, "dtype");
  Status st = el.ok() ? CheckTag(file, name, type, *el, r.dtype) : el.status();
  if (st.ok()) st = CheckDeclaredSize(file, name, ds, space, type);
  if (!st.ok()) {
    close();
    return st;
  }
  // The elements as stored, little-endian: an IEEE float or integer type of
  // the same layout (no value is converted), h5py's bool enum as uint8.
  r.width = el->width;
  r.cls = el->cls == 'b' ? 'u' : el->cls;
  if (el->cls == 'b') {
    r.dtype = "bool";
    mem = H5Tcopy(H5T_NATIVE_UINT8);
  } else if (el->cls == 'f') {
    mem = H5Tcopy(type);  // IEEE: only the byte order may differ
    H5Tset_order(mem, H5T_ORDER_LE);
  } else if (el->cls == 'c') {
    mem = ComplexType(el->width);  // h5py's {r, i}, little-endian
  } else {
    const bool s = el->cls == 'i';
    const int w = el->width;
    mem = H5Tcopy(w == 1 ? (s ? H5T_STD_I8LE : H5T_STD_U8LE)
                  : w == 2 ? (s ? H5T_STD_I16LE : H5T_STD_U16LE)
                  : w == 4 ? (s ? H5T_STD_I32LE : H5T_STD_U32LE)
                           : (s ? H5T_STD_I64LE : H5T_STD_U64LE));
  }
  int64_t n = 1;
  for (int64_t d : r.dims) n *= d;
  r.data.resize(static_cast<size_t>(n) * static_cast<size_t>(r.width));
  if (n > 0 && H5Dread(ds, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, r.data.data()) < 0) {
    close();
    return DataLossError(file + ": cannot read '" + name + "'");
  }
  close();
  return r;
}

Status H5Writer::WriteRaw(const std::string& name, const H5Raw& raw) {
  H5open();
  hid_t type = -1;
  if (raw.cls == 'f' && raw.width == 4) type = H5T_IEEE_F32LE_g;
  else if (raw.cls == 'f' && raw.width == 8) type = H5T_IEEE_F64LE_g;
  else if (raw.cls == 'i' && raw.width == 1) type = H5T_STD_I8LE_g;
  else if (raw.cls == 'i' && raw.width == 2) type = H5T_STD_I16LE_g;
  else if (raw.cls == 'i' && raw.width == 4) type = H5T_STD_I32LE_g;
  else if (raw.cls == 'i' && raw.width == 8) type = H5T_STD_I64LE_g;
  else if (raw.cls == 'u' && raw.width == 1) type = H5T_STD_U8LE_g;
  else if (raw.cls == 'u' && raw.width == 2) type = H5T_STD_U16LE_g;
  else if (raw.cls == 'u' && raw.width == 4) type = H5T_STD_U32LE_g;
  else if (raw.cls == 'u' && raw.width == 8) type = H5T_STD_U64LE_g;
  else if (raw.cls == 'c' && (raw.width == 8 || raw.width == 16)) type = ComplexType(raw.width);
  else if (raw.cls == 'f' && raw.width == 2) type = HalfType();
  else return InvalidArgumentError(name + ": unsupported element type");
  // Closes the type made for a complex or half dataset on every return.
  struct CloseType {
    hid_t t;
    bool owned;
    ~CloseType() {
      if (owned) H5Tclose(t);
    }
  } close_type{type, raw.cls == 'c' || (raw.cls == 'f' && raw.width == 2)};
  std::vector<hsize_t> dims(raw.dims.begin(), raw.dims.end());
  hid_t space = dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  hid_t dcpl = UntimedDatasets();
  hid_t ds = H5Dcreate2(file_, name.c_str(), type, space, lcpl, dcpl, H5P_DEFAULT);
  H5Pclose(dcpl);
  H5Pclose(lcpl);
  H5Sclose(space);
  if (ds < 0) return InternalError(path_ + ": cannot create dataset '" + name + "'");
  Status st;
  if (!raw.data.empty() && H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw.data.data()) < 0)
    st = InternalError(path_ + ": cannot write dataset '" + name + "'");
  if (st.ok() && !raw.dtype.empty()) {
    hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, raw.dtype.size());
    hid_t as = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(ds, "dtype", str, as, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0 || H5Awrite(a, str, raw.dtype.data()) < 0) st = InternalError(path_ + ": cannot write the dtype of '" + name + "'");
    if (a >= 0) H5Aclose(a);
    H5Sclose(as);
    H5Tclose(str);
  }
  H5Dclose(ds);
  return st;
}

Status H5Writer::WriteStrings(const std::string& name, const std::vector<std::string>& values) {
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  const hsize_t dims[1] = {values.size()};
  const hid_t space = H5Screate_simple(1, dims, nullptr);
  const hid_t dcpl = UntimedDatasets();
  const hid_t ds = H5Dcreate2(file_, name.c_str(), type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  H5Pclose(dcpl);
  std::vector<const char*> ptrs;
  for (const std::string& v : values) ptrs.push_back(v.c_str());
  const bool ok = ds >= 0 && (values.empty() || H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()) >= 0);
  if (ds >= 0) H5Dclose(ds);
  H5Sclose(space);
  H5Tclose(type);
  return ok ? OkStatus() : InternalError(path_ + ": cannot write dataset '" + name + "'");
}

StatusOr<std::string> H5Writer::Finish() {
  if (file_ < 0) return FailedPreconditionError(path_ + ": the HDF5 image is already finished");
  if (H5Fflush(file_, H5F_SCOPE_GLOBAL) < 0) return InternalError(path_ + ": cannot finish the HDF5 image");
  const ssize_t size = H5Fget_file_image(file_, nullptr, 0);
  if (size < 0) return InternalError(path_ + ": cannot finish the HDF5 image");
  std::string bytes(static_cast<size_t>(size), '\0');
  if (H5Fget_file_image(file_, bytes.data(), bytes.size()) != size)
    return InternalError(path_ + ": cannot finish the HDF5 image");
  H5Fclose(file_);
  file_ = -1;
  return bytes;
}

Status H5Writer::Commit() {
  TPUMESH_ASSIGN_OR_RETURN(std::string bytes, Finish());
  return WriteFileAtomic(path_, bytes);
}

}  // namespace tpumesh::pipeline
