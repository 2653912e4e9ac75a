#include "models/flops.h"

#include <algorithm>

namespace tpumesh::models {
namespace {

// Adds the layers of one forward pass as the model code calls them.
class Counter {
 public:
  explicit Counter(int64_t batch) : b_(static_cast<double>(batch)) {}

  // rows x [in] -> [out].
  void Linear(double rows, double in, double out) { f_.linear += 2 * rows * in * out; }
  // [B, c_in, h, w] -> [B, c_out, Ho, Wo]; returns Ho (square inputs and
  // symmetric strides: Wo follows the same formula).
  int64_t Conv(int64_t h, int64_t w, int64_t c_in, int64_t c_out, int64_t k, int64_t stride, int64_t pad_lo,
               int64_t pad_hi) {
    const int64_t ho = (h + pad_lo + pad_hi - k) / stride + 1, wo = (w + pad_lo + pad_hi - k) / stride + 1;
    f_.conv += 2 * b_ * static_cast<double>(ho * wo) * c_out * c_in * k * k;
    return ho;
  }
  // Q K^T and P V over `hidden` = heads x head_dim columns.
  void Attention(double lq, double lk, double hidden) { f_.attention += 4 * b_ * lq * lk * hidden; }

  // ResnetBlock2D (UNet with a time projection from temb, VAE without).
  void Resnet(int64_t h, int64_t w, int64_t c_in, int64_t c_out, int64_t temb) {
    Conv(h, w, c_in, c_out, 3, 1, 1, 1);
    if (temb > 0) Linear(b_, temb, c_out);
    Conv(h, w, c_out, c_out, 3, 1, 1, 1);
    if (c_in != c_out) Conv(h, w, c_in, c_out, 1, 1, 0, 0);
  }

  // Transformer2DModel: proj_in, `layers` BasicTransformerBlocks
  // (self-attention, cross-attention, GEGLU feed-forward), proj_out; the
  // projections are 1x1 convs, or Linear layers with use_linear_projection.
  void Transformer(int64_t h, int64_t w, int64_t c, int64_t cross, int64_t layers, int64_t context,
                   bool linear_projection) {
    const double tokens = b_ * static_cast<double>(h * w), l = static_cast<double>(h * w);
    auto projection = [&] {
      if (linear_projection) Linear(tokens, c, c);
      else Conv(h, w, c, c, 1, 1, 0, 0);
    };
    projection();  // proj_in
    for (int64_t i = 0; i < layers; ++i) {
      Linear(tokens, c, c);  // attn1 q, k, v, out
      Linear(tokens, c, c);
      Linear(tokens, c, c);
      Attention(l, l, c);
      Linear(tokens, c, c);
      Linear(tokens, c, c);  // attn2 q
      Linear(b_ * context, cross, c);  // attn2 k, v from the text
      Linear(b_ * context, cross, c);
      Attention(l, static_cast<double>(context), c);
      Linear(tokens, c, c);
      Linear(tokens, c, 8 * c);  // GEGLU projection to 2 x 4C
      Linear(tokens, 4 * c, c);
    }
    projection();  // proj_out
  }

  // The VAE's mid-block attention: one head over the h*w positions.
  void VaeAttention(int64_t h, int64_t w, int64_t c) {
    const double tokens = b_ * static_cast<double>(h * w), l = static_cast<double>(h * w);
    for (int i = 0; i < 3; ++i) Linear(tokens, c, c);
    Attention(l, l, c);
    Linear(tokens, c, c);
  }

  double batch() const { return b_; }
  const MatmulFlops& flops() const { return f_; }

 private:
  double b_;
  MatmulFlops f_;
};

}  // namespace

MatmulFlops ClipTextMatmulFlops(const ClipTextConfig& c, int64_t batch, int64_t seq_len) {
  Counter n(batch);
  const double tokens = static_cast<double>(batch * seq_len), h = c.hidden_size;
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    for (int j = 0; j < 4; ++j) n.Linear(tokens, h, h);  // q, k, v, out
    n.Attention(static_cast<double>(seq_len), static_cast<double>(seq_len), h);
    n.Linear(tokens, h, c.intermediate_size);
    n.Linear(tokens, c.intermediate_size, h);
  }
  return n.flops();
}

MatmulFlops UNetMatmulFlops(const UNetConfig& c, int64_t batch, int64_t height, int64_t width,
                            int64_t context_len) {
  Counter n(batch);
  const int levels = static_cast<int>(c.block_out_channels.size());
  const int64_t c0 = c.block_out_channels[0], temb = c.time_embed_dim();
  n.Linear(n.batch(), c0, temb);  // time_embedding
  n.Linear(n.batch(), temb, temb);
  if (c.text_time_embedding) {
    n.Linear(n.batch(), c.projection_class_embeddings_input_dim, temb);  // add_embedding
    n.Linear(n.batch(), temb, temb);
  }
  int64_t h = height, w = width;
  const int64_t pad_in = c.conv_in_kernel / 2;
  n.Conv(h, w, c.in_channels, c0, c.conv_in_kernel, 1, pad_in, pad_in);
  int64_t out = c0;
  for (int i = 0; i < levels; ++i) {
    const int64_t in = out;
    out = c.block_out_channels[i];
    const bool attn = c.down_block_types[i] == "CrossAttnDownBlock2D";
    for (int j = 0; j < c.layers_per_block; ++j) {
      n.Resnet(h, w, j == 0 ? in : out, out, temb);
      if (attn)
        n.Transformer(h, w, out, c.cross_attention_dim[i], c.transformer_layers_per_block[i], context_len,
                      c.use_linear_projection);
    }
    if (i < levels - 1) {
      const int64_t p = c.downsample_padding;
      const int64_t ho = n.Conv(h, w, out, out, 3, 2, p, p);
      w = (w + 2 * p - 3) / 2 + 1;
      h = ho;
    }
  }
  const int64_t mid = c.block_out_channels.back();
  n.Resnet(h, w, mid, mid, temb);
  n.Transformer(h, w, mid, c.cross_attention_dim.back(), c.transformer_layers_per_block.back(), context_len,
                c.use_linear_projection);
  n.Resnet(h, w, mid, mid, temb);
  int64_t prev = mid;
  for (int i = 0; i < levels; ++i) {
    const int r = levels - 1 - i;  // the matching down block
    const int64_t o = c.block_out_channels[r];
    const int64_t skip_in = c.block_out_channels[std::max(r - 1, 0)];
    const bool attn = c.up_block_types[i] == "CrossAttnUpBlock2D";
    for (int j = 0; j <= c.layers_per_block; ++j) {
      const int64_t skip = j == c.layers_per_block ? skip_in : o;
      n.Resnet(h, w, (j == 0 ? prev : o) + skip, o, temb);
      if (attn)
        n.Transformer(h, w, o, c.cross_attention_dim[r], c.transformer_layers_per_block[r], context_len,
                      c.use_linear_projection);
    }
    if (i < levels - 1) {
      h *= 2;
      w *= 2;
      n.Conv(h, w, o, o, 3, 1, 1, 1);
    }
    prev = o;
  }
  const int64_t pad_out = c.conv_out_kernel / 2;
  n.Conv(h, w, c0, c.out_channels, c.conv_out_kernel, 1, pad_out, pad_out);
  return n.flops();
}

MatmulFlops VaeDecoderMatmulFlops(const VaeConfig& c, int64_t batch, int64_t height, int64_t width) {
  Counter n(batch);
  const int levels = static_cast<int>(c.block_out_channels.size());
  const int64_t last = c.block_out_channels.back();
  int64_t h = height, w = width;
  if (c.use_post_quant_conv) n.Conv(h, w, c.latent_channels, c.latent_channels, 1, 1, 0, 0);
  n.Conv(h, w, c.latent_channels, last, 3, 1, 1, 1);
  n.Resnet(h, w, last, last, 0);
  if (c.mid_block_add_attention) n.VaeAttention(h, w, last);
  n.Resnet(h, w, last, last, 0);
  int64_t prev = last;
  for (int i = 0; i < levels; ++i) {
    const int64_t o = c.block_out_channels[levels - 1 - i];
    for (int j = 0; j <= c.layers_per_block; ++j) n.Resnet(h, w, j == 0 ? prev : o, o, 0);
    if (i < levels - 1) {
      h *= 2;
      w *= 2;
      n.Conv(h, w, o, o, 3, 1, 1, 1);
    }
    prev = o;
  }
  n.Conv(h, w, c.block_out_channels[0], c.out_channels, 3, 1, 1, 1);
  return n.flops();
}

MatmulFlops VaeEncoderMatmulFlops(const VaeConfig& c, int64_t batch, int64_t height, int64_t width) {
  Counter n(batch);
  const int levels = static_cast<int>(c.block_out_channels.size());
  const int64_t last = c.block_out_channels.back();
  int64_t h = height, w = width;
  n.Conv(h, w, c.in_channels, c.block_out_channels[0], 3, 1, 1, 1);
  int64_t out = c.block_out_channels[0];
  for (int i = 0; i < levels; ++i) {
    const int64_t in = out;
    out = c.block_out_channels[i];
    for (int j = 0; j < c.layers_per_block; ++j) n.Resnet(h, w, j == 0 ? in : out, out, 0);
    if (i < levels - 1) {  // diffusers pads (0, 1, 0, 1), stride 2
      const int64_t ho = n.Conv(h, w, out, out, 3, 2, 0, 1);
      w = (w + 1 - 3) / 2 + 1;
      h = ho;
    }
  }
  n.Resnet(h, w, last, last, 0);
  if (c.mid_block_add_attention) n.VaeAttention(h, w, last);
  n.Resnet(h, w, last, last, 0);
  n.Conv(h, w, last, 2 * c.latent_channels, 3, 1, 1, 1);
  if (c.use_quant_conv) n.Conv(h, w, 2 * c.latent_channels, 2 * c.latent_channels, 1, 1, 0, 0);
  return n.flops();
}

}  // namespace tpumesh::models
