// Each block of the models (CLIP, UNet, VAE; Flux's transformer and T5
// encoder) declared once: its layers with their
// checkpoint names, weight shapes, how each splits over the model axis, and
// the activation sizes they run at. The parameter manifests (configs.h
// ClipTextParams, UNetParams, VaeParams), the FLOP counts (flops.h) and,
// through the manifests' splits, the sharding plan are all derived from
// these walks, so they cannot disagree; the forward code in clip.cc,
// unet.cc and vae.cc reads the same names (tests/models/flops_test.cc holds
// the counts equal to what a dry run records, and architectures_test the
// manifests to their pinned digests).
//
// Contract: a walk calls the visitor once per layer in checkpoint order
// (the manifest's order, which fixes `init`'s random draws) and once per
// attention product; it never allocates tensors. The sizes only change the
// rows/pixels reported, never which layers are declared.
#ifndef TPUMESH_MODELS_BLOCKS_H_
#define TPUMESH_MODELS_BLOCKS_H_

#include <cstdint>
#include <string>

#include "models/configs.h"

namespace tpumesh::models {

// How a layer is split over the model axis (Megatron's column and row
// parallel layers): kColumn splits the output features (weight rows, bias)
// and leaves the output sharded; kRow splits the input features (weight
// columns) and leaves partial sums that a psum adds, the bias after it;
// kGathered is kColumn whose output is all_gathered (equal shards only).
enum class Split { kNone, kColumn, kRow, kGathered };
struct Parallel {
  Split split = Split::kNone;
  int64_t units = 0;     // heads, groups, columns or channels
  const char* unit = "";
  int parts = 1;         // a fused weight of `parts` halves, each split alike
};
// The ParamSplit (configs.h) of a layer's weight and of its bias.
ParamSplit WeightSplit(const Parallel& p);
ParamSplit BiasSplit(const Parallel& p);

// The sizes a walk runs at. For the UNet and the VAE decoder, height x width
// are latent pixels; for the VAE encoder, image pixels; `context` is the
// text length (the UNet's cross-attention keys, the text encoder's
// sequence); `pooled` the rows the text projection runs on (0: the walk
// stops at last_hidden_state, as CLIPTextModel).
struct WalkSizes {
  int64_t batch = 1;
  int64_t height = 64, width = 64;
  int64_t context = 77;
  int64_t pooled = 0;
};

class LayerVisitor {
 public:
  virtual ~LayerVisitor() = default;
  // weight [out, in] (+ bias [out]) applied to `rows` rows.
  virtual void Linear(const std::string& name, int64_t out, int64_t in, bool bias, const Parallel& par,
                      double rows) = 0;
  // weight [out, in, k, k] + bias [out], producing [batch, out, ho, wo].
  virtual void Conv(const std::string& name, int64_t out, int64_t in, int64_t k, const Parallel& par,
                    double batch, int64_t ho, int64_t wo) = 0;
  // A normalisation's weight and bias [c].
  virtual void Norm(const std::string& name, int64_t c, const ParamSplit& split) = 0;
  // A normalisation with a weight [c] only (RMSNorm, T5's layer norm).
  virtual void Scale(const std::string& name, int64_t c) = 0;
  // A table read by index (embeddings): weight [rows, dim].
  virtual void Table(const std::string& name, int64_t rows, int64_t dim) = 0;
  // Q K^T and P V of one attention: `batch` x (lq x lk) over `hidden` =
  // heads x head_dim columns.
  virtual void Attention(double batch, double lq, double lk, double hidden) = 0;
};

void WalkClipText(const ClipTextConfig& c, const WalkSizes& s, LayerVisitor& v);
void WalkUNet(const UNetConfig& c, const WalkSizes& s, LayerVisitor& v);
// The parts of an AutoencoderKL: the encoder (with quant_conv), the decoder
// (with post_quant_conv), or both in checkpoint order (the manifest).
enum class VaePart { kEncoder, kDecoder, kAll };
void WalkVae(const VaeConfig& c, const WalkSizes& s, VaePart part, LayerVisitor& v);
// T5EncoderModel on `context` tokens.
void WalkT5Encoder(const T5EncoderConfig& c, const WalkSizes& s, LayerVisitor& v);
// FluxTransformer2DModel: height x width latent pixels (packed 2x2, so
// height/2 x width/2 image tokens) joined by `context` text tokens.
void WalkFluxTransformer(const FluxTransformerConfig& c, const WalkSizes& s, LayerVisitor& v);

}  // namespace tpumesh::models

#endif  // TPUMESH_MODELS_BLOCKS_H_
