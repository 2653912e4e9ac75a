#include "io/h5_dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace tpumesh::pipeline {
namespace {

// Deflate's largest compression ratio (zlib's documentation: 1032:1).
constexpr double kDeflateMaxRatio = 1032;

// An external link is never followed, wherever it sits on a path.
herr_t RefuseExternalLink(const char*, const char*, const char*, const char*, unsigned*, hid_t, void*) { return -1; }

hid_t NoExternalLinks() {
  const hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
  H5Pset_elink_cb(dapl, RefuseExternalLink, nullptr);
  return dapl;
}

// An attribute's or tag's text kept to printable ASCII, for a message.
std::string Printed(const std::string& s) {
  std::string out;
  for (const char c : s.substr(0, 64)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return out;
}

bool IsIeee(hid_t type, size_t width) {
  size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
  if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) < 0) return false;
  const H5T_order_t order = H5Tget_order(type);
  if ((order != H5T_ORDER_LE && order != H5T_ORDER_BE) || H5Tget_offset(type) != 0 ||
      H5Tget_precision(type) != 8 * width || H5Tget_norm(type) != H5T_NORM_IMPLIED)
    return false;
  struct Layout {
    size_t width, spos, epos, esize, msize, ebias;
  };
  static constexpr Layout kIeee[] = {{2, 15, 10, 5, 10, 15}, {4, 31, 23, 8, 23, 127}, {8, 63, 52, 11, 52, 1023}};
  for (const Layout& l : kIeee)
    if (l.width == width && spos == l.spos && epos == l.epos && esize == l.esize && mpos == 0 && msize == l.msize &&
        H5Tget_ebias(type) == l.ebias)
      return true;
  return false;
}

}  // namespace

std::string DescribeH5Type(hid_t type) {
  const size_t width = H5Tget_size(type);
  const std::string bytes = std::to_string(width) + "-byte ";
  switch (H5Tget_class(type)) {
    case H5T_FLOAT: {
      size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
      H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize);
      char fields[160];
      std::snprintf(fields, sizeof fields, " (sign bit %zu, %zu-bit exponent at bit %zu with bias %zu, %zu-bit mantissa)",
                    spos, esize, epos, H5Tget_ebias(type), msize);
      return "a " + bytes + "float" + fields;
    }
    case H5T_INTEGER:
      return "a " + bytes + (H5Tget_sign(type) == H5T_SGN_2 ? "signed" : "unsigned") + " integer";
    case H5T_OPAQUE: {
      char* tag = H5Tget_tag(type);
      const std::string t = tag ? Printed(tag) : "";
      if (tag) H5free_memory(tag);
      return "a " + bytes + "opaque type" + (t.empty() ? "" : " tagged '" + t + "'");
    }
    case H5T_COMPOUND:
      return "a " + bytes + "compound type of " + std::to_string(std::max(H5Tget_nmembers(type), 0)) + " members";
    case H5T_STRING: return "strings";
    case H5T_ENUM: return "a " + bytes + "enum";
    case H5T_ARRAY: return "a " + bytes + "array type";
    case H5T_VLEN: return "a variable-length type";
    case H5T_BITFIELD: return "a " + bytes + "bitfield";
    case H5T_REFERENCE: return "references";
    case H5T_TIME: return "a time type";
    default: return "an unknown HDF5 type";
  }
}

bool IsComplexPair(hid_t type) {
  const size_t width = H5Tget_size(type);
  if (H5Tget_class(type) != H5T_COMPOUND || H5Tget_nmembers(type) != 2 || (width != 8 && width != 16)) return false;
  const char* kNames[] = {"r", "i"};
  bool ok = true;
  H5T_order_t order = H5T_ORDER_NONE;
  for (unsigned m = 0; m < 2 && ok; ++m) {
    char* name = H5Tget_member_name(type, m);
    ok = name && std::string(name) == kNames[m] && H5Tget_member_offset(type, m) == m * width / 2;
    if (name) H5free_memory(name);
    const hid_t part = ok ? H5Tget_member_type(type, m) : -1;
    ok = ok && part >= 0 && H5Tget_class(part) == H5T_FLOAT && H5Tget_size(part) == width / 2 &&
         IsIeee(part, width / 2) && (m == 0 || H5Tget_order(part) == order);
    if (ok) order = H5Tget_order(part);
    if (part >= 0) H5Tclose(part);
  }
  return ok;
}

StatusOr<H5Element> ClassifyElements(hid_t type, const std::string& where) {
  const size_t width = H5Tget_size(type);
  const H5T_class_t cls = H5Tget_class(type);
  const bool word = width == 1 || width == 2 || width == 4 || width == 8;
  if (cls == H5T_FLOAT && IsIeee(type, width)) return H5Element{'f', static_cast<int>(width)};
  if (IsComplexPair(type)) return H5Element{'c', static_cast<int>(width)};
  if (cls == H5T_INTEGER && word) return H5Element{H5Tget_sign(type) == H5T_SGN_2 ? 'i' : 'u', static_cast<int>(width)};
  if (cls == H5T_ENUM && width == 1) return H5Element{'b', 1};  // h5py's bool
  std::string hint;
  if (cls == H5T_FLOAT) hint = " (not IEEE half, single or double)";
  return InvalidArgumentError(where + " holds " + DescribeH5Type(type) + hint +
                              "; tpumesh reads IEEE floats of 2, 4 or 8 bytes, integers of 1, 2, 4 or 8 bytes "
                              "(bfloat16 as uint16 with dtype=\"bfloat16\") and complex numbers as h5py stores them "
                              "(a compound {r, i} of two IEEE floats of 4 or 8 bytes)");
}

StatusOr<hid_t> OpenDatasetForReading(hid_t file, const std::string& name, const std::string& where,
                                      const std::string& not_found) {
  const hid_t dapl = NoExternalLinks();
  // Every link on the path, in order, before it is followed: an external
  // link names another file.
  for (size_t pos = name.find('/', 1);; pos = name.find('/', pos + 1)) {
    const std::string prefix = name.substr(0, pos);
    if (!prefix.empty() && prefix != "/") {
      H5L_info_t info;
      if (H5Lexists(file, prefix.c_str(), dapl) <= 0 || H5Lget_info(file, prefix.c_str(), &info, dapl) < 0) {
        H5Pclose(dapl);
        return NotFoundError(not_found);
      }
      if (info.type == H5L_TYPE_EXTERNAL) {
        H5Pclose(dapl);
        return InvalidArgumentError(where + " is reached through an external link to another file; tpumesh reads only "
                                            "datasets stored in the file itself");
      }
    }
    if (pos == std::string::npos) break;
  }
  const hid_t ds = H5Dopen2(file, name.c_str(), dapl);
  H5Pclose(dapl);
  if (ds < 0) return InvalidArgumentError(where + " is not a dataset");
  const hid_t dcpl = H5Dget_create_plist(ds);
  std::string refused;
  const H5D_layout_t layout = dcpl < 0 ? H5D_LAYOUT_ERROR : H5Pget_layout(dcpl);
  if (layout == H5D_VIRTUAL) {
    refused = " is a virtual dataset (its elements are other datasets', or the fill value where those are missing)";
  } else if (layout != H5D_COMPACT && layout != H5D_CONTIGUOUS && layout != H5D_CHUNKED) {
    refused = " has an unknown storage layout (" + std::to_string(static_cast<int>(layout)) + ")";
  } else if (H5Pget_external_count(dcpl) != 0) {
    refused = " has external storage (its elements are another file's bytes)";
  } else if (layout == H5D_CHUNKED) {
    const int filters = H5Pget_nfilters(dcpl);
    for (int i = 0; i < filters && refused.empty(); ++i) {
      unsigned flags = 0, config = 0;
      size_t nvalues = 0;
      char filter_name[64] = {0};
      const H5Z_filter_t id = H5Pget_filter2(dcpl, static_cast<unsigned>(i), &flags, &nvalues, nullptr,
                                             sizeof filter_name, filter_name, &config);
      if (id != H5Z_FILTER_DEFLATE && id != H5Z_FILTER_SHUFFLE && id != H5Z_FILTER_FLETCHER32)
        refused = " is stored through HDF5 filter " + std::to_string(id) + " ('" + Printed(filter_name) +
                  "'); tpumesh reads deflate (gzip), shuffle and fletcher32 only";
    }
  }
  if (dcpl >= 0) H5Pclose(dcpl);
  if (!refused.empty()) {
    H5Dclose(ds);
    return InvalidArgumentError(where + refused +
                                (refused.find("tpumesh reads") == std::string::npos
                                     ? "; tpumesh reads only datasets that hold their elements in the file itself"
                                     : ""));
  }
  return ds;
}

bool H5Filtered(hid_t ds) {
  const hid_t dcpl = H5Dget_create_plist(ds);
  const bool filtered = dcpl >= 0 && H5Pget_nfilters(dcpl) > 0;
  if (dcpl >= 0) H5Pclose(dcpl);
  return filtered;
}

double H5HeldBytes(hid_t ds) {
  const double stored = static_cast<double>(H5Dget_storage_size(ds));
  const hid_t dcpl = H5Dget_create_plist(ds);
  if (dcpl < 0) return stored;
  double held = stored;
  if (H5Pget_layout(dcpl) == H5D_CHUNKED) {
    const hid_t space = H5Dget_space(ds), type = H5Dget_type(ds);
    const int rank = H5Sget_simple_extent_ndims(space);
    std::vector<hsize_t> chunk(static_cast<size_t>(std::max(rank, 0)));
    hsize_t written = 0;
    if (rank >= 0 && H5Pget_chunk(dcpl, rank, chunk.data()) == rank && H5Dget_num_chunks(ds, space, &written) >= 0) {
      double chunk_bytes = static_cast<double>(H5Tget_size(type));
      for (const hsize_t c : chunk) chunk_bytes *= static_cast<double>(c);
      // An unfiltered chunk stores its bytes as they are.
      held = std::min(static_cast<double>(written) * chunk_bytes,
                      (H5Pget_nfilters(dcpl) > 0 ? kDeflateMaxRatio : 1) * stored);
    }
    H5Tclose(type);
    H5Sclose(space);
  }
  H5Pclose(dcpl);
  return held;
}

std::string ReadShortStringAttribute(hid_t obj, const char* name) {
  std::string out;
  if (H5Aexists(obj, name) <= 0) return out;
  const hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  const hid_t at = a < 0 ? -1 : H5Aget_type(a);
  if (at >= 0 && H5Tget_class(at) == H5T_STRING && H5Tget_size(at) <= (1 << 16)) {
    if (H5Tis_variable_str(at) > 0) {
      char* v = nullptr;
      const hid_t st = H5Tget_native_type(at, H5T_DIR_ASCEND);
      if (H5Aread(a, st, &v) >= 0 && v) {
        out = std::string(v).substr(0, 64);
        H5free_memory(v);
      }
      H5Tclose(st);
    } else {
      const size_t len = std::min<size_t>(H5Tget_size(at), 64);
      // The attribute's whole size: HDF5 writes all of it.
      std::string v(H5Tget_size(at), '\0');
      if (H5Aread(a, at, v.data()) >= 0) out = v.substr(0, std::min(len, v.find('\0')));
    }
  }
  if (at >= 0) H5Tclose(at);
  if (a >= 0) H5Aclose(a);
  return out;
}

}  // namespace tpumesh::pipeline
