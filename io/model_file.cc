#include "io/model_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "base/input_file.h"
#include "hdf5.h"
#include "io/atomic_file.h"
#include "io/h5_dataset.h"
#include "kernels/bf16.h"

namespace tpumesh::pipeline {
namespace {

// Silences HDF5's own error printing: every failure becomes one Status.
void QuietHdf5() {
  static bool done = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
}

// Closes an HDF5 handle when it goes out of scope.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }
  // Closes now; the result a destructor would drop (a dataset's close writes
  // its buffered data).
  herr_t Close() {
    const herr_t rc = id_ >= 0 ? close_(id_) : 0;
    id_ = -1;
    return rc;
  }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

Status WriteStringAttribute(hid_t obj, const char* name, const std::string& value) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(obj, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) return InternalError(std::string("cannot create attribute ") + name);
  const char* p = value.c_str();
  if (H5Awrite(attr.get(), type.get(), &p) < 0) return InternalError(std::string("cannot write attribute ") + name);
  return OkStatus();
}

StatusOr<std::string> ReadStringAttribute(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return NotFoundError(std::string("no attribute ") + name);
  Handle attr(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  Handle ftype(H5Aget_type(attr.get()), H5Tclose);
  if (H5Tget_class(ftype.get()) != H5T_STRING) return InvalidArgumentError(std::string("attribute ") + name + " is not a string");
  if (H5Tis_variable_str(ftype.get()) > 0) {
    Handle mtype(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mtype.get(), H5T_VARIABLE);
    H5Tset_cset(mtype.get(), H5Tget_cset(ftype.get()));
    char* p = nullptr;
    if (H5Aread(attr.get(), mtype.get(), &p) < 0 || p == nullptr) return InternalError("cannot read attribute");
    std::string s(p);
    H5free_memory(p);
    return s;
  }
  const size_t n = H5Tget_size(ftype.get());
  std::string s(n, '\0');
  Handle mtype(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(mtype.get(), n);
  H5Tset_cset(mtype.get(), H5Tget_cset(ftype.get()));
  if (H5Aread(attr.get(), mtype.get(), s.data()) < 0) return InternalError("cannot read attribute");
  s.resize(strnlen(s.c_str(), n));
  return s;
}

}  // namespace

void DisableHdf5ExitHandler() { H5dont_atexit(); }

// ---------------------------------------------------------------------------
// ModelFileWriter

StatusOr<std::unique_ptr<ModelFileWriter>> ModelFileWriter::Create(const std::string& path) {
  QuietHdf5();
  std::unique_ptr<ModelFileWriter> w(new ModelFileWriter());
  w->path_ = path;
  const std::filesystem::path p(path);
  const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : ".";
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return NotFoundError(path + ": directory " + dir.string() + " does not exist");
  w->temp_path_ = TemporaryPathBeside(path);
  RegisterTempFile(w->temp_path_);
  w->file_ = H5Fcreate(w->temp_path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (w->file_ < 0) return InvalidArgumentError(path + ": cannot create (is the directory writable?)");
  TPUMESH_RETURN_IF_ERROR(WriteStringAttribute(w->file_, "format", kModelFormat));
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(w->file_, "format_version", H5T_STD_I32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
              H5Aclose);
  const int32_t v = kModelFormatVersion;
  H5Awrite(attr.get(), H5T_NATIVE_INT32, &v);
  return w;
}

ModelFileWriter::~ModelFileWriter() {
  if (file_ >= 0) H5Fclose(file_);
  if (!committed_ && !temp_path_.empty()) std::remove(temp_path_.c_str());
  if (!temp_path_.empty()) UnregisterTempFile(temp_path_);
}

Status ModelFileWriter::EnsureGroup(const std::string& group) {
  if (group.empty() || H5Lexists(file_, group.c_str(), H5P_DEFAULT) > 0) return OkStatus();
  Handle gcpl(H5Pcreate(H5P_GROUP_CREATE), H5Pclose);
  H5Pset_obj_track_times(gcpl.get(), false);
  Handle g(H5Gcreate2(file_, group.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT), H5Gclose);
  if (!g.ok()) return InternalError(path_ + ": cannot create group " + group);
  return OkStatus();
}

Status ModelFileWriter::WriteText(const std::string& dataset, const std::string& text) {
  const size_t slash = dataset.rfind('/');
  if (slash != std::string::npos) TPUMESH_RETURN_IF_ERROR(EnsureGroup(dataset.substr(0, slash)));
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_obj_track_times(dcpl.get(), false);
  Handle ds(H5Dcreate2(file_, dataset.c_str(), type.get(), space.get(), H5P_DEFAULT, dcpl.get(),
                       H5P_DEFAULT),
            H5Dclose);
  if (!ds.ok()) return InternalError(path_ + ": cannot create dataset " + dataset);
  const char* p = text.c_str();
  if (H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &p) < 0 || ds.Close() < 0)
    return DataLossError(path_ + ": cannot write " + dataset + " (disk full?)");
  return OkStatus();
}

Status ModelFileWriter::WriteTensor(const std::string& component, const std::string& name,
                                    const mesh::Array& a, mesh::DType store_as) {
  if (name.empty() || name.find('/') != std::string::npos)
    return InvalidArgumentError("tensor name '" + name + "' is empty or contains '/'");
  if (store_as != mesh::DType::kF32 && store_as != mesh::DType::kBF16)
    return InvalidArgumentError("tensors are stored as f32 or bf16");
  if (a.dtype() != mesh::DType::kF32 && a.dtype() != mesh::DType::kBF16)
    return InvalidArgumentError(component + "/" + name + ": only f32 and bf16 tensors are stored");
  TPUMESH_RETURN_IF_ERROR(EnsureGroup(component));
  const std::string dataset = component + "/" + name;
  std::vector<hsize_t> dims(a.shape().begin(), a.shape().end());
  Handle space(dims.empty() ? H5Screate(H5S_SCALAR)
                            : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
               H5Sclose);
  const hid_t file_type = store_as == mesh::DType::kF32 ? H5T_IEEE_F32LE : H5T_STD_U16LE;
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_obj_track_times(dcpl.get(), false);  // same inputs -> same file bytes
  Handle ds(H5Dcreate2(file_, dataset.c_str(), file_type, space.get(), H5P_DEFAULT, dcpl.get(),
                       H5P_DEFAULT),
            H5Dclose);
  if (!ds.ok()) return InternalError(path_ + ": cannot create dataset " + dataset + " (duplicate name?)");
  herr_t rc;
  if (store_as == mesh::DType::kF32) {
    if (a.dtype() == mesh::DType::kF32) {
      rc = H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, a.raw());
    } else {
      std::vector<float> tmp(a.num_elements());
      kernels::Bf16ToF32(a.data<kernels::bf16>(), tmp.data(), tmp.size());
      rc = H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, tmp.data());
    }
  } else {
    if (a.dtype() == mesh::DType::kBF16) {
      rc = H5Dwrite(ds.get(), H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, a.raw());
    } else {
      std::vector<kernels::bf16> tmp(a.num_elements());
      kernels::F32ToBf16(a.data<float>(), tmp.data(), tmp.size());
      rc = H5Dwrite(ds.get(), H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, tmp.data());
    }
    if (rc >= 0) TPUMESH_RETURN_IF_ERROR(WriteStringAttribute(ds.get(), "dtype", "bfloat16"));
  }
  if (rc < 0 || ds.Close() < 0) return DataLossError(path_ + ": cannot write " + dataset + " (disk full?)");
  return OkStatus();
}

Status ModelFileWriter::Commit() {
  const herr_t closed = H5Fclose(file_);
  file_ = -1;
  if (closed < 0) return DataLossError(path_ + ": cannot finish the file (disk full?)");
  // On disk before it takes the target's name.
  const int fd = ::open(temp_path_.c_str(), O_RDONLY | O_CLOEXEC);
  int e = fd < 0 ? errno : 0;
  if (fd >= 0 && ::fsync(fd) != 0) e = errno;
  if (fd >= 0) ::close(fd);
  if (e != 0) return ErrnoStatus("cannot write " + path_, e);
  std::error_code ec;
  const CommitSection commit;  // the signal handler waits for the rename
  std::filesystem::rename(temp_path_, path_, ec);
  if (ec) return InvalidArgumentError(path_ + ": cannot move the finished file into place: " + ec.message());
  SyncDirectories({path_});  // the rename itself durable
  committed_ = true;
  return OkStatus();
}

// ---------------------------------------------------------------------------
// ModelFile

StatusOr<std::unique_ptr<ModelFile>> ModelFile::Open(const std::string& path) {
  QuietHdf5();
  TPUMESH_RETURN_IF_ERROR(CheckInputFile(path).status());
  if (H5Fis_hdf5(path.c_str()) <= 0) return InvalidArgumentError(path + ": not an HDF5 file (truncated or corrupt?)");
  std::unique_ptr<ModelFile> f(new ModelFile());
  f->path_ = path;
  f->file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f->file_ < 0) return InvalidArgumentError(path + ": cannot open as HDF5 (truncated or corrupt?)");
  TPUMESH_RETURN_IF_ERROR(f->CheckFormat());
  return f;
}

StatusOr<std::unique_ptr<ModelFile>> ModelFile::OpenImage(std::string_view bytes, const std::string& name) {
  QuietHdf5();
  // HDF5's core driver over a copy of the bytes, with no backing file:
  // nothing is written anywhere.
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (H5Pset_fapl_core(fapl.get(), 1 << 20, /*backing_store=*/0) < 0 ||
      H5Pset_file_image(fapl.get(), const_cast<char*>(bytes.data()), bytes.size()) < 0)
    return InternalError(name + ": cannot set up HDF5's in-memory driver");
  std::unique_ptr<ModelFile> f(new ModelFile());
  f->path_ = name;
  f->file_ = H5Fopen(name.c_str(), H5F_ACC_RDONLY, fapl.get());
  if (f->file_ < 0) return InvalidArgumentError(name + ": cannot open as HDF5 (truncated or corrupt?)");
  TPUMESH_RETURN_IF_ERROR(f->CheckFormat());
  return f;
}

Status ModelFile::CheckFormat() const {
  auto format = ReadStringAttribute(file_, "format");
  if (!format.ok() || *format != kModelFormat)
    return InvalidArgumentError(path_ + ": not a tpumesh model file (no format=\"" + kModelFormat +
                                "\" attribute; make one with `tpumesh convert` or `tpumesh init`)");
  // A file of another version may lay its tensors out differently: refused,
  // never read as if it were this one.
  const std::string known = "this tpumesh reads version " + std::to_string(kModelFormatVersion);
  if (H5Aexists(file_, "format_version") <= 0)
    return InvalidArgumentError(path_ + ": no format_version attribute (" + known + ")");
  Handle attr(H5Aopen(file_, "format_version", H5P_DEFAULT), H5Aclose);
  Handle type(H5Aget_type(attr.get()), H5Tclose);
  Handle space(H5Aget_space(attr.get()), H5Sclose);
  int64_t version = -1;
  if (H5Tget_class(type.get()) != H5T_INTEGER || H5Sget_simple_extent_npoints(space.get()) != 1 ||
      H5Aread(attr.get(), H5T_NATIVE_INT64, &version) < 0)
    return InvalidArgumentError(path_ + ": format_version is not one integer (" + known + ")");
  if (version != kModelFormatVersion)
    return InvalidArgumentError(path_ + ": model file format version " + std::to_string(version) + "; " + known +
                                " (write the file again with this tpumesh's convert or init)");
  return OkStatus();
}

StatusOr<int64_t> ModelFile::OpenDataset(const std::string& dataset, const std::string& not_found) const {
  if (!Has(dataset)) return NotFoundError(not_found);
  return OpenDatasetForReading(file_, dataset, path_ + ": " + dataset, not_found);
}

int64_t ModelFile::size_bytes() const {
  hsize_t size = 0;
  return H5Fget_filesize(file_, &size) < 0 ? 0 : static_cast<int64_t>(size);
}

ModelFile::~ModelFile() {
  if (file_ >= 0) H5Fclose(file_);
}

bool ModelFile::Has(const std::string& dataset) const {
  // H5Lexists needs every intermediate link to exist.
  size_t pos = 0;
  while ((pos = dataset.find('/', pos + 1)) != std::string::npos) {
    if (H5Lexists(file_, dataset.substr(0, pos).c_str(), H5P_DEFAULT) <= 0) return false;
  }
  return H5Lexists(file_, dataset.c_str(), H5P_DEFAULT) > 0;
}

StatusOr<std::string> ModelFile::ReadText(const std::string& dataset) const {
  TPUMESH_ASSIGN_OR_RETURN(hid_t id, OpenDataset(dataset, path_ + ": no dataset " + dataset));
  Handle ds(id, H5Dclose);
  Handle ftype(H5Dget_type(ds.get()), H5Tclose);
  if (H5Tget_class(ftype.get()) != H5T_STRING) return InvalidArgumentError(path_ + ": " + dataset + " is not text");
  Handle mtype(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_cset(mtype.get(), H5Tget_cset(ftype.get()));
  if (H5Tis_variable_str(ftype.get()) > 0) {
    H5Tset_size(mtype.get(), H5T_VARIABLE);
    char* p = nullptr;
    if (H5Dread(ds.get(), mtype.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &p) < 0 || p == nullptr)
      return DataLossError(path_ + ": cannot read " + dataset);
    std::string s(p);
    H5free_memory(p);
    return s;
  }
  const size_t n = H5Tget_size(ftype.get());
  H5Tset_size(mtype.get(), n);
  std::string s(n, '\0');
  if (H5Dread(ds.get(), mtype.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, s.data()) < 0)
    return DataLossError(path_ + ": cannot read " + dataset);
  s.resize(strnlen(s.c_str(), n));
  return s;
}

StatusOr<std::vector<std::string>> ModelFile::TensorNames(const std::string& component) const {
  if (!Has(component)) return NotFoundError(path_ + ": no component '" + component + "'");
  Handle g(H5Gopen2(file_, component.c_str(), H5P_DEFAULT), H5Gclose);
  if (!g.ok()) return InvalidArgumentError(path_ + ": " + component + " is not a group");
  std::vector<std::string> names;
  H5Literate(
      g.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr,
      [](hid_t group, const char* name, const H5L_info_t* link, void* data) -> herr_t {
        // A link to another file is never followed: listed, so that reading
        // it is refused naming it (OpenDatasetForReading).
        if (link->type == H5L_TYPE_EXTERNAL) {
          static_cast<std::vector<std::string>*>(data)->push_back(name);
          return 0;
        }
        H5O_info_t info;
        if (H5Oget_info_by_name(group, name, &info, H5P_DEFAULT) >= 0 && info.type == H5O_TYPE_DATASET) {
          hid_t ds = H5Dopen2(group, name, H5P_DEFAULT);
          hid_t t = H5Dget_type(ds);
          if (H5Tget_class(t) != H5T_STRING) static_cast<std::vector<std::string>*>(data)->push_back(name);
          H5Tclose(t);
          H5Dclose(ds);
        }
        return 0;
      },
      &names);
  std::sort(names.begin(), names.end());
  return names;
}

StatusOr<TensorInfo> ModelFile::Info(const std::string& component, const std::string& name) const {
  const std::string dataset = component + "/" + name;
  TPUMESH_ASSIGN_OR_RETURN(hid_t id, OpenDataset(dataset, path_ + ": missing tensor " + dataset));
  Handle ds(id, H5Dclose);
  Handle space(H5Dget_space(ds.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) return DataLossError(path_ + ": " + dataset + " has no readable shape");
  std::vector<hsize_t> dims(rank);
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  TensorInfo info;
  info.shape.assign(dims.begin(), dims.end());
  Handle ftype(H5Dget_type(ds.get()), H5Tclose);
  const size_t size = H5Tget_size(ftype.get());
  // The declared bytes, saturating: a shape whose product passes 2^63 is as
  // refused as one past what the file holds.
  double declared = static_cast<double>(size);
  for (const hsize_t d : dims) declared *= static_cast<double>(d);
  // What the storage holds, decompressed for a compressed dataset (h5py's
  // gzip): never more than it declares, nor (uncompressed) than the file.
  const double stored = static_cast<double>(H5Dget_storage_size(ds.get()));
  const double ratio = H5Filtered(ds.get()) ? kMaxDecompression : 1;
  if (declared > H5HeldBytes(ds.get()) || declared > ratio * static_cast<double>(size_bytes())) {
    char why[160];
    std::snprintf(why, sizeof why, " (%.0f bytes) but stores %.0f bytes in a file of %lld (truncated or forged?)",
                  declared, stored, static_cast<long long>(size_bytes()));
    return InvalidArgumentError(path_ + ": " + dataset + " declares shape " + mesh::ShapeToString(info.shape) + why);
  }
  TPUMESH_ASSIGN_OR_RETURN(H5Element el, ClassifyElements(ftype.get(), path_ + ": " + dataset));
  if (el.cls == 'f' && el.width == 4) {
    info.stored = mesh::DType::kF32;
  } else if ((el.cls == 'u' || el.cls == 'i') && el.width == 2) {
    auto tag = ReadStringAttribute(ds.get(), "dtype");
    if (!tag.ok() || *tag != "bfloat16")
      return InvalidArgumentError(path_ + ": " + dataset + " is uint16 without dtype=\"bfloat16\"");
    info.stored = mesh::DType::kBF16;
  } else {
    return InvalidArgumentError(path_ + ": " + dataset + " holds " + DescribeH5Type(ftype.get()) +
                                "; a model file stores f32 or bf16 (f32 or bf16 expected)");
  }
  return info;
}

StatusOr<mesh::Array> ModelFile::ReadTensor(const std::string& component, const std::string& name,
                                            mesh::DType as) const {
  TPUMESH_ASSIGN_OR_RETURN(TensorInfo info, Info(component, name));
  const std::string dataset = component + "/" + name;
  TPUMESH_ASSIGN_OR_RETURN(hid_t id, OpenDataset(dataset, path_ + ": missing tensor " + dataset));
  Handle ds(id, H5Dclose);
  mesh::Array out = mesh::Array::Host(as, info.shape);
  herr_t rc;
  if (info.stored == mesh::DType::kF32 && as == mesh::DType::kF32) {
    rc = H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.mutable_raw());
  } else if (info.stored == mesh::DType::kBF16 && as == mesh::DType::kBF16) {
    rc = H5Dread(ds.get(), H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.mutable_raw());
  } else if (info.stored == mesh::DType::kBF16) {  // -> f32
    std::vector<kernels::bf16> tmp(out.num_elements());
    rc = H5Dread(ds.get(), H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, tmp.data());
    kernels::Bf16ToF32(tmp.data(), out.mutable_data<float>(), tmp.size());
  } else {  // f32 -> bf16
    std::vector<float> tmp(out.num_elements());
    rc = H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, tmp.data());
    kernels::F32ToBf16(tmp.data(), out.mutable_data<kernels::bf16>(), tmp.size());
  }
  if (rc < 0) return DataLossError(path_ + ": cannot read " + dataset + " (truncated or corrupt file?)");
  return out;
}

}  // namespace tpumesh::pipeline
