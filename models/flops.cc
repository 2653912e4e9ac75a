#include "models/flops.h"

#include "models/blocks.h"

namespace tpumesh::models {
namespace {

// The matmul FLOPs of the layers a walk (blocks.h) declares.
class FlopCounter : public LayerVisitor {
 public:
  void Linear(const std::string&, int64_t out, int64_t in, bool, const Parallel&, double rows) override {
    f_.linear += 2 * rows * static_cast<double>(in) * static_cast<double>(out);
  }
  void Conv(const std::string&, int64_t out, int64_t in, int64_t k, const Parallel&, double batch, int64_t ho,
            int64_t wo) override {
    f_.conv += 2 * batch * static_cast<double>(ho * wo) * static_cast<double>(out * in * k * k);
  }
  void Norm(const std::string&, int64_t, const ParamSplit&) override {}
  void Scale(const std::string&, int64_t) override {}
  void Table(const std::string&, int64_t, int64_t) override {}
  void Attention(double batch, double lq, double lk, double hidden) override {
    f_.attention += 4 * batch * lq * lk * hidden;
  }
  const MatmulFlops& flops() const { return f_; }

 private:
  MatmulFlops f_;
};

}  // namespace

MatmulFlops ClipTextMatmulFlops(const ClipTextConfig& c, int64_t batch, int64_t seq_len) {
  FlopCounter n;
  WalkClipText(c, {.batch = batch, .context = seq_len}, n);
  return n.flops();
}

MatmulFlops UNetMatmulFlops(const UNetConfig& c, int64_t batch, int64_t height, int64_t width,
                            int64_t context_len) {
  FlopCounter n;
  WalkUNet(c, {.batch = batch, .height = height, .width = width, .context = context_len}, n);
  return n.flops();
}

MatmulFlops VaeDecoderMatmulFlops(const VaeConfig& c, int64_t batch, int64_t height, int64_t width) {
  FlopCounter n;
  WalkVae(c, {.batch = batch, .height = height, .width = width}, VaePart::kDecoder, n);
  return n.flops();
}

MatmulFlops VaeEncoderMatmulFlops(const VaeConfig& c, int64_t batch, int64_t height, int64_t width) {
  FlopCounter n;
  WalkVae(c, {.batch = batch, .height = height, .width = width}, VaePart::kEncoder, n);
  return n.flops();
}

MatmulFlops T5EncoderMatmulFlops(const T5EncoderConfig& c, int64_t batch, int64_t seq_len) {
  FlopCounter n;
  WalkT5Encoder(c, {.batch = batch, .context = seq_len}, n);
  return n.flops();
}

MatmulFlops FluxTransformerMatmulFlops(const FluxTransformerConfig& c, int64_t batch, int64_t height, int64_t width,
                                       int64_t context_len) {
  FlopCounter n;
  WalkFluxTransformer(c, {.batch = batch, .height = height, .width = width, .context = context_len}, n);
  return n.flops();
}

}  // namespace tpumesh::models
