// The one gate every HDF5 dataset tpumesh reads passes through (io/h5io.h's
// readers: run --inputs, eval inputs, --latents, Python's read_dataset; the
// model file, io/model_file.h): what a dataset's storage is, and what its
// elements are. Internal to io/ (it names HDF5's types).
//
// Contract: every refusal is InvalidArgument, one line starting with the
// caller's `where` (the file and the dataset). A dataset is read only when
// it holds its elements itself, all of them:
// - storage compact, contiguous, or chunked with at most the standard
//   filters deflate (gzip), shuffle and fletcher32; never external storage
//   (H5Pset_external: another file's bytes, any file), a virtual dataset
//   (other datasets' elements, or the fill value when they are missing),
//   another filter, or a path through an external link (another file);
// - all of its elements written: the bytes it declares at most
//   H5HeldBytes (unwritten storage or chunks would read as the fill value),
//   checked by the caller against its own bounds before it allocates;
// - elements IEEE floats of 2, 4 or 8 bytes (either byte order: native half
//   as h5py writes np.float16), integers of 1, 2, 4 or 8 bytes, or h5py's
//   1-byte bool enum; any other float layout (bfloat16's 1-8-7 as an HDF5
//   float, long double, float128), opaque, compound and the rest are refused
//   naming the HDF5 type: bits are never reinterpreted, values never cast.
//   The one compound read is h5py's complex64 / complex128: exactly two
//   members named r and i, at offsets 0 and half the width, IEEE floats of
//   4 (or both of 8) bytes in one byte order.
#ifndef TPUMESH_IO_H5_DATASET_H_
#define TPUMESH_IO_H5_DATASET_H_

#include <string>

#include "base/status.h"
#include "hdf5.h"

namespace tpumesh::pipeline {

// Opens dataset `name` of the open file `file` after the checks above;
// NotFound(`not_found`) when no such link exists. The caller closes it.
StatusOr<hid_t> OpenDatasetForReading(hid_t file, const std::string& name, const std::string& where,
                                      const std::string& not_found);

// The bytes the dataset's storage holds once decoded: compact or
// contiguous, the bytes stored; chunked, the written chunks' bytes, for a
// filtered dataset at most 1032 times the bytes stored (deflate's largest
// ratio), so that a forged chunk holds no more than real compression could.
// Compare the bytes a dataset declares with this, never with the stored
// bytes of a compressed dataset.
double H5HeldBytes(hid_t ds);
// Whether its chunks pass through filters (compression).
bool H5Filtered(hid_t ds);

// An element type as tpumesh reads it: 'f' IEEE float, 'i' signed or 'u'
// unsigned integer, 'b' h5py's bool, 'c' complex (h5py's compound {r, i});
// width in bytes (a complex element's whole width: 8 or 16).
struct H5Element {
  char cls = 'f';
  int width = 4;
};
StatusOr<H5Element> ClassifyElements(hid_t type, const std::string& where);

// The HDF5 type in words for messages: "a 2-byte float (sign bit 15, 8-bit
// exponent at bit 7 with bias 127, 7-bit mantissa)", "a 2-byte opaque type
// tagged 'NUMPY:bfloat16'", "a 4-byte signed integer".
std::string DescribeH5Type(hid_t type);

// The string attribute `name` of `obj` ("" when absent or not a string),
// at most 64 bytes.
std::string ReadShortStringAttribute(hid_t obj, const char* name);

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_IO_H5_DATASET_H_
