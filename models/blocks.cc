#include "models/blocks.h"

#include <algorithm>
#include <vector>

namespace tpumesh::models {

ParamSplit WeightSplit(const Parallel& p) {
  if (p.split == Split::kRow) return {1, p.units, p.parts, false, p.unit};
  if (p.split == Split::kColumn || p.split == Split::kGathered)
    return {0, p.units, p.parts, p.split == Split::kGathered, p.unit};
  return {};
}

ParamSplit BiasSplit(const Parallel& p) { return p.split == Split::kRow ? ParamSplit{} : WeightSplit(p); }

namespace {

Parallel Column(int64_t units, const char* unit, int parts = 1) { return {Split::kColumn, units, unit, parts}; }
Parallel Row(int64_t units, const char* unit, int parts = 1) { return {Split::kRow, units, unit, parts}; }
Parallel Gathered(int64_t units) { return {Split::kGathered, units, "channels", 1}; }

struct Hw {
  int64_t h = 0, w = 0;
  double pixels() const { return static_cast<double>(h * w); }
};

// The blocks, each declared once, over a visitor at a batch size.
class Walk {
 public:
  Walk(LayerVisitor& v, int64_t batch) : v_(v), b_(static_cast<double>(batch)) {}

  double batch() const { return b_; }

  void Linear(const std::string& name, int64_t out, int64_t in, double rows, bool bias = true, Parallel par = {}) {
    v_.Linear(name, out, in, bias, par, rows);
  }
  // A k x k convolution with the given stride and padding (before, after)
  // on both spatial axes; returns the output size.
  Hw Conv(const std::string& name, int64_t out, int64_t in, int64_t k, Hw x, int64_t stride, int64_t pad_lo,
          int64_t pad_hi, Parallel par = {}) {
    const Hw y{(x.h + pad_lo + pad_hi - k) / stride + 1, (x.w + pad_lo + pad_hi - k) / stride + 1};
    v_.Conv(name, out, in, k, par, b_, y.h, y.w);
    return y;
  }
  // Stride 1, "same" padding.
  Hw Conv(const std::string& name, int64_t out, int64_t in, int64_t k, Hw x, Parallel par = {}) {
    return Conv(name, out, in, k, x, 1, k / 2, k / 2, par);
  }
  void Norm(const std::string& name, int64_t c, ParamSplit split = {}) { v_.Norm(name, c, split); }
  void Scale(const std::string& name, int64_t c) { v_.Scale(name, c); }
  void Table(const std::string& name, int64_t rows, int64_t dim) { v_.Table(name, rows, dim); }
  void Attention(double lq, double lk, double hidden) { v_.Attention(b_, lq, lk, hidden); }

  // ResnetBlock2D; temb 0: no time embedding projection (the VAE). Split by
  // GroupNorm groups: conv1, the time projection and norm2 by output
  // channels (a group's channels stay on one rank, so norm2's statistics are
  // local), conv2 by input channels (one psum); norm1 and the shortcut whole.
  void Resnet(const std::string& name, Hw x, int64_t in, int64_t out, int64_t temb, int64_t groups) {
    Norm(name + ".norm1", in);
    Conv(name + ".conv1", out, in, 3, x, Column(groups, "groups"));
    if (temb > 0) Linear(name + ".time_emb_proj", out, temb, b_, true, Column(groups, "groups"));
    Norm(name + ".norm2", out, WeightSplit(Column(groups, "groups")));
    Conv(name + ".conv2", out, out, 3, x, Row(groups, "groups"));
    if (in != out) Conv(name + ".conv_shortcut", out, in, 1, x);
  }

  // Transformer2DModel with `layers` BasicTransformerBlocks (self-attention,
  // cross-attention over `context` text tokens of width `cross`, GEGLU
  // feed-forward of 4x width); proj_in / proj_out are 1x1 convs, or Linear
  // layers with use_linear_projection. Attention by heads (q, k, v by
  // output, to_out by input: one psum each), the feed-forward by its 4C
  // columns (one psum); proj_in / proj_out by output channels, all_gathered.
  void Transformer(const std::string& name, Hw x, int64_t c, int64_t cross, int layers, bool linear_proj,
                   int64_t heads, int64_t context) {
    const double tokens = b_ * x.pixels(), l = x.pixels(), text = b_ * static_cast<double>(context);
    auto projection = [&](const std::string& p) {
      if (linear_proj) Linear(name + p, c, c, tokens, true, Gathered(c));
      else Conv(name + p, c, c, 1, x, Gathered(c));
    };
    Norm(name + ".norm", c);
    projection(".proj_in");
    for (int i = 0; i < layers; ++i) {
      const std::string b = name + ".transformer_blocks." + std::to_string(i);
      Norm(b + ".norm1", c);
      Linear(b + ".attn1.to_q", c, c, tokens, false, Column(heads, "heads"));
      Linear(b + ".attn1.to_k", c, c, tokens, false, Column(heads, "heads"));
      Linear(b + ".attn1.to_v", c, c, tokens, false, Column(heads, "heads"));
      Attention(l, l, c);
      Linear(b + ".attn1.to_out.0", c, c, tokens, true, Row(heads, "heads"));
      Norm(b + ".norm2", c);
      Linear(b + ".attn2.to_q", c, c, tokens, false, Column(heads, "heads"));
      Linear(b + ".attn2.to_k", c, cross, text, false, Column(heads, "heads"));
      Linear(b + ".attn2.to_v", c, cross, text, false, Column(heads, "heads"));
      Attention(l, static_cast<double>(context), c);
      Linear(b + ".attn2.to_out.0", c, c, tokens, true, Row(heads, "heads"));
      Norm(b + ".norm3", c);
      Linear(b + ".ff.net.0.proj", 8 * c, c, tokens, true, Column(4 * c, "columns", 2));  // GEGLU: 2 x 4C
      Linear(b + ".ff.net.2", c, 4 * c, tokens, true, Row(4 * c, "columns"));
    }
    projection(".proj_out");
  }

  // The VAE's single-head mid-block attention: whole on every rank (one head
  // cannot be split by heads; it is under 1% of the decoder's work).
  void VaeAttention(const std::string& name, Hw x, int64_t c) {
    const double tokens = b_ * x.pixels(), l = x.pixels();
    Norm(name + ".group_norm", c);
    Linear(name + ".to_q", c, c, tokens);
    Linear(name + ".to_k", c, c, tokens);
    Linear(name + ".to_v", c, c, tokens);
    Attention(l, l, c);
    Linear(name + ".to_out.0", c, c, tokens);
  }

 private:
  LayerVisitor& v_;
  double b_;
};

}  // namespace

void WalkClipText(const ClipTextConfig& c, const WalkSizes& s, LayerVisitor& v) {
  Walk n(v, s.batch);
  const int64_t h = c.hidden_size;
  const double tokens = n.batch() * static_cast<double>(s.context), seq = static_cast<double>(s.context);
  n.Table("text_model.embeddings.token_embedding", c.vocab_size, h);
  n.Table("text_model.embeddings.position_embedding", c.max_position_embeddings, h);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string b = "text_model.encoder.layers." + std::to_string(l);
    // Attention by heads, the MLP by its hidden columns: one psum each.
    for (const char* proj : {"k_proj", "v_proj", "q_proj"})
      n.Linear(b + ".self_attn." + proj, h, h, tokens, true, Column(c.num_attention_heads, "heads"));
    n.Attention(seq, seq, static_cast<double>(h));
    n.Linear(b + ".self_attn.out_proj", h, h, tokens, true, Row(c.num_attention_heads, "heads"));
    n.Norm(b + ".layer_norm1", h);
    n.Linear(b + ".mlp.fc1", c.intermediate_size, h, tokens, true, Column(c.intermediate_size, "columns"));
    n.Linear(b + ".mlp.fc2", h, c.intermediate_size, tokens, true, Row(c.intermediate_size, "columns"));
    n.Norm(b + ".layer_norm2", h);
  }
  n.Norm("text_model.final_layer_norm", h);
  if (c.with_projection) n.Linear("text_projection", c.projection_dim, h, static_cast<double>(s.pooled), false);
}

void WalkUNet(const UNetConfig& c, const WalkSizes& s, LayerVisitor& v) {
  Walk n(v, s.batch);
  const int levels = static_cast<int>(c.block_out_channels.size());
  const int64_t c0 = c.block_out_channels[0];
  const int64_t temb = c.time_embed_dim();
  const int64_t g = c.norm_num_groups;
  Hw x{s.height, s.width};
  n.Conv("conv_in", c0, c.in_channels, c.conv_in_kernel, x);
  n.Linear("time_embedding.linear_1", temb, c0, n.batch());
  n.Linear("time_embedding.linear_2", temb, temb, n.batch());
  if (c.text_time_embedding) {
    n.Linear("add_embedding.linear_1", temb, c.projection_class_embeddings_input_dim, n.batch());
    n.Linear("add_embedding.linear_2", temb, temb, n.batch());
  }
  int64_t out = c0;
  for (int i = 0; i < levels; ++i) {
    const int64_t in = out;
    out = c.block_out_channels[i];
    const std::string b = "down_blocks." + std::to_string(i);
    const bool attn = c.down_block_types[i] == "CrossAttnDownBlock2D";
    for (int j = 0; j < c.layers_per_block; ++j) {
      n.Resnet(b + ".resnets." + std::to_string(j), x, j == 0 ? in : out, out, temb, g);
      if (attn)
        n.Transformer(b + ".attentions." + std::to_string(j), x, out, c.cross_attention_dim[i],
                      c.transformer_layers_per_block[i], c.use_linear_projection, c.num_attention_heads[i],
                      s.context);
    }
    if (i < levels - 1) {
      const int64_t p = c.downsample_padding;
      x = n.Conv(b + ".downsamplers.0.conv", out, out, 3, x, 2, p, p, Gathered(out));
    }
  }
  const int64_t mid = c.block_out_channels.back();
  n.Resnet("mid_block.resnets.0", x, mid, mid, temb, g);
  n.Transformer("mid_block.attentions.0", x, mid, c.cross_attention_dim.back(), c.transformer_layers_per_block.back(),
                c.use_linear_projection, c.num_attention_heads.back(), s.context);
  n.Resnet("mid_block.resnets.1", x, mid, mid, temb, g);
  int64_t prev = mid;
  for (int i = 0; i < levels; ++i) {
    const int r = levels - 1 - i;  // the matching down block
    const int64_t o = c.block_out_channels[r];
    const int64_t skip_in = c.block_out_channels[std::max(r - 1, 0)];
    const std::string b = "up_blocks." + std::to_string(i);
    const bool attn = c.up_block_types[i] == "CrossAttnUpBlock2D";
    for (int j = 0; j <= c.layers_per_block; ++j) {
      const int64_t skip = j == c.layers_per_block ? skip_in : o;
      n.Resnet(b + ".resnets." + std::to_string(j), x, (j == 0 ? prev : o) + skip, o, temb, g);
      if (attn)
        n.Transformer(b + ".attentions." + std::to_string(j), x, o, c.cross_attention_dim[r],
                      c.transformer_layers_per_block[r], c.use_linear_projection, c.num_attention_heads[r],
                      s.context);
    }
    if (i < levels - 1) {
      x = {2 * x.h, 2 * x.w};  // nearest 2x, then the conv
      n.Conv(b + ".upsamplers.0.conv", o, o, 3, x, Gathered(o));
    }
    prev = o;
  }
  n.Norm("conv_norm_out", c0);
  n.Conv("conv_out", c.out_channels, c0, c.conv_out_kernel, x);
}

void WalkVae(const VaeConfig& c, const WalkSizes& s, VaePart part, LayerVisitor& v) {
  Walk n(v, s.batch);
  const int levels = static_cast<int>(c.block_out_channels.size());
  const int64_t c0 = c.block_out_channels[0];
  const int64_t last = c.block_out_channels.back();
  const int64_t g = c.norm_num_groups;
  const int64_t moments = 2 * c.latent_channels;
  Hw x{s.height, s.width};
  if (part != VaePart::kDecoder) {
    x = n.Conv("encoder.conv_in", c0, c.in_channels, 3, x);
    int64_t out = c0;
    for (int i = 0; i < levels; ++i) {
      const int64_t in = out;
      out = c.block_out_channels[i];
      const std::string b = "encoder.down_blocks." + std::to_string(i);
      for (int j = 0; j < c.layers_per_block; ++j)
        n.Resnet(b + ".resnets." + std::to_string(j), x, j == 0 ? in : out, out, 0, g);
      // diffusers pads (0, 1, 0, 1), stride 2.
      if (i < levels - 1) x = n.Conv(b + ".downsamplers.0.conv", out, out, 3, x, 2, 0, 1, Gathered(out));
    }
    n.Resnet("encoder.mid_block.resnets.0", x, last, last, 0, g);
    if (c.mid_block_add_attention) n.VaeAttention("encoder.mid_block.attentions.0", x, last);
    n.Resnet("encoder.mid_block.resnets.1", x, last, last, 0, g);
    n.Norm("encoder.conv_norm_out", last);
    x = n.Conv("encoder.conv_out", moments, last, 3, x);
  }
  const Hw encoded = x, latents = part == VaePart::kDecoder ? Hw{s.height, s.width} : encoded;
  if (part != VaePart::kEncoder) {
    x = n.Conv("decoder.conv_in", last, c.latent_channels, 3, latents);
    n.Resnet("decoder.mid_block.resnets.0", x, last, last, 0, g);
    if (c.mid_block_add_attention) n.VaeAttention("decoder.mid_block.attentions.0", x, last);
    n.Resnet("decoder.mid_block.resnets.1", x, last, last, 0, g);
    int64_t prev = last;
    for (int i = 0; i < levels; ++i) {
      const int64_t o = c.block_out_channels[levels - 1 - i];
      const std::string b = "decoder.up_blocks." + std::to_string(i);
      for (int j = 0; j <= c.layers_per_block; ++j)
        n.Resnet(b + ".resnets." + std::to_string(j), x, j == 0 ? prev : o, o, 0, g);
      if (i < levels - 1) {
        x = {2 * x.h, 2 * x.w};  // nearest 2x, then the conv
        n.Conv(b + ".upsamplers.0.conv", o, o, 3, x, Gathered(o));
      }
      prev = o;
    }
    n.Norm("decoder.conv_norm_out", c0);
    n.Conv("decoder.conv_out", c.out_channels, c0, 3, x);
  }
  // The 1x1 convs around the latent space, last in the checkpoint.
  if (part != VaePart::kDecoder && c.use_quant_conv) n.Conv("quant_conv", moments, moments, 1, encoded);
  if (part != VaePart::kEncoder && c.use_post_quant_conv)
    n.Conv("post_quant_conv", c.latent_channels, c.latent_channels, 1, latents);
}

void WalkT5Encoder(const T5EncoderConfig& c, const WalkSizes& s, LayerVisitor& v) {
  Walk n(v, s.batch);
  const int64_t d = c.d_model, inner = c.inner_dim();
  const double tokens = n.batch() * static_cast<double>(s.context), seq = static_cast<double>(s.context);
  n.Table("shared", c.vocab_size, d);
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string b = "encoder.block." + std::to_string(l) + ".layer.";
    for (const char* proj : {"q", "k", "v"}) n.Linear(b + "0.SelfAttention." + proj, inner, d, tokens, false);
    n.Attention(seq, seq, static_cast<double>(inner));
    n.Linear(b + "0.SelfAttention.o", d, inner, tokens, false);
    // Only the first block holds the relative position bias; every block uses it.
    if (l == 0) n.Table(b + "0.SelfAttention.relative_attention_bias", c.relative_attention_num_buckets, c.num_heads);
    n.Scale(b + "0.layer_norm", d);
    n.Linear(b + "1.DenseReluDense.wi_0", c.d_ff, d, tokens, false);
    n.Linear(b + "1.DenseReluDense.wi_1", c.d_ff, d, tokens, false);
    n.Linear(b + "1.DenseReluDense.wo", d, c.d_ff, tokens, false);
    n.Scale(b + "1.layer_norm", d);
  }
  n.Scale("encoder.final_layer_norm", d);
}

void WalkFluxTransformer(const FluxTransformerConfig& c, const WalkSizes& s, LayerVisitor& v) {
  Walk n(v, s.batch);
  const int64_t d = c.dim(), hd = c.attention_head_dim;
  const double b = n.batch();
  const double li = static_cast<double>((s.height / 2) * (s.width / 2)), lt = static_cast<double>(s.context);
  const double img = b * li, txt = b * lt, all = img + txt;
  n.Linear("x_embedder", d, c.in_channels, img);
  // time_text_embed: the timestep's (and, guidance-distilled, the
  // guidance's) 256-wide sinusoidal embedding through a 2-layer MLP, plus
  // the pooled text through PixArtAlphaTextProjection.
  n.Linear("time_text_embed.timestep_embedder.linear_1", d, 256, b);
  n.Linear("time_text_embed.timestep_embedder.linear_2", d, d, b);
  if (c.guidance_embeds) {
    n.Linear("time_text_embed.guidance_embedder.linear_1", d, 256, b);
    n.Linear("time_text_embed.guidance_embedder.linear_2", d, d, b);
  }
  n.Linear("time_text_embed.text_embedder.linear_1", d, c.pooled_projection_dim, b);
  n.Linear("time_text_embed.text_embedder.linear_2", d, d, b);
  n.Linear("context_embedder", d, c.joint_attention_dim, txt);
  // Over the model axis (Megatron): each attention by heads (q, k, v and the
  // context's by output, the output projections by input: one psum per
  // stream), each MLP by its 4D columns (one psum); the single blocks' MLP
  // by heads too, 4 parts of D rows each, so that [attention; MLP] of a rank
  // is the rank's share of proj_out's 5 parts of D input columns (one psum).
  // The embedders, modulation projections and norms are whole (replicated).
  const int64_t heads = c.num_attention_heads;
  const Parallel by_heads = Column(heads, "heads"), to_out = Row(heads, "heads");
  const Parallel mlp_in = Column(4 * d, "columns"), mlp_out = Row(4 * d, "columns");
  for (int i = 0; i < c.num_layers; ++i) {
    // FluxTransformerBlock (MMDiT): each stream its own AdaLayerNormZero
    // (6 modulation vectors), projections and feed-forward; one joint
    // attention over [text; image].
    const std::string p = "transformer_blocks." + std::to_string(i);
    n.Linear(p + ".norm1.linear", 6 * d, d, b);
    n.Linear(p + ".norm1_context.linear", 6 * d, d, b);
    n.Scale(p + ".attn.norm_q", hd);
    n.Scale(p + ".attn.norm_k", hd);
    for (const char* proj : {".attn.to_q", ".attn.to_k", ".attn.to_v"}) n.Linear(p + proj, d, d, img, true, by_heads);
    for (const char* proj : {".attn.add_k_proj", ".attn.add_v_proj", ".attn.add_q_proj"})
      n.Linear(p + proj, d, d, txt, true, by_heads);
    n.Attention(li + lt, li + lt, static_cast<double>(d));
    n.Linear(p + ".attn.to_out.0", d, d, img, true, to_out);
    n.Linear(p + ".attn.to_add_out", d, d, txt, true, to_out);
    n.Scale(p + ".attn.norm_added_q", hd);
    n.Scale(p + ".attn.norm_added_k", hd);
    n.Linear(p + ".ff.net.0.proj", 4 * d, d, img, true, mlp_in);
    n.Linear(p + ".ff.net.2", d, 4 * d, img, true, mlp_out);
    n.Linear(p + ".ff_context.net.0.proj", 4 * d, d, txt, true, mlp_in);
    n.Linear(p + ".ff_context.net.2", d, 4 * d, txt, true, mlp_out);
  }
  for (int i = 0; i < c.num_single_layers; ++i) {
    // FluxSingleTransformerBlock over the joined sequence: attention and a
    // GELU-tanh MLP side by side, one output projection of both.
    const std::string p = "single_transformer_blocks." + std::to_string(i);
    n.Linear(p + ".norm.linear", 3 * d, d, b);
    n.Linear(p + ".proj_mlp", 4 * d, d, all, true, Column(heads, "heads", 4));
    n.Linear(p + ".proj_out", d, 5 * d, all, true, Row(heads, "heads", 5));
    n.Scale(p + ".attn.norm_q", hd);
    n.Scale(p + ".attn.norm_k", hd);
    for (const char* proj : {".attn.to_q", ".attn.to_k", ".attn.to_v"}) n.Linear(p + proj, d, d, all, true, by_heads);
    n.Attention(li + lt, li + lt, static_cast<double>(d));
  }
  n.Linear("norm_out.linear", 2 * d, d, b);
  n.Linear("proj_out", c.out(), d, img);
}

// ---------------------------------------------------------------------------
// The manifests: every parameter a walk declares, in its order.

namespace {

class ParamCollector : public LayerVisitor {
 public:
  void Linear(const std::string& name, int64_t out, int64_t in, bool bias, const Parallel& par, double) override {
    Layer(name, {out, in}, bias, par);
  }
  void Conv(const std::string& name, int64_t out, int64_t in, int64_t k, const Parallel& par, double, int64_t,
            int64_t) override {
    Layer(name, {out, in, k, k}, true, par);
  }
  void Norm(const std::string& name, int64_t c, const ParamSplit& split) override {
    params_.push_back({name + ".weight", {c}, split});
    params_.push_back({name + ".bias", {c}, split});
  }
  void Scale(const std::string& name, int64_t c) override { params_.push_back({name + ".weight", {c}, {}}); }
  void Table(const std::string& name, int64_t rows, int64_t dim) override {
    params_.push_back({name + ".weight", {rows, dim}, {}});
  }
  void Attention(double, double, double, double) override {}

  std::vector<ParamSpec> Take() { return std::move(params_); }

 private:
  void Layer(const std::string& name, mesh::Shape w, bool bias, const Parallel& par) {
    const int64_t out = w[0];
    params_.push_back({name + ".weight", std::move(w), WeightSplit(par)});
    if (bias) params_.push_back({name + ".bias", {out}, BiasSplit(par)});
  }
  std::vector<ParamSpec> params_;
};

}  // namespace

std::vector<ParamSpec> ClipTextParams(const ClipTextConfig& c) {
  ParamCollector p;
  WalkClipText(c, {}, p);
  return p.Take();
}

std::vector<ParamSpec> UNetParams(const UNetConfig& c) {
  ParamCollector p;
  WalkUNet(c, {}, p);
  return p.Take();
}

std::vector<ParamSpec> VaeParams(const VaeConfig& c) {
  ParamCollector p;
  WalkVae(c, {}, VaePart::kAll, p);
  return p.Take();
}

std::vector<ParamSpec> T5EncoderParams(const T5EncoderConfig& c) {
  ParamCollector p;
  WalkT5Encoder(c, {}, p);
  return p.Take();
}

std::vector<ParamSpec> FluxTransformerParams(const FluxTransformerConfig& c) {
  ParamCollector p;
  WalkFluxTransformer(c, {}, p);
  return p.Take();
}

int64_t CountParameters(const std::vector<ParamSpec>& params) {
  int64_t n = 0;
  for (const auto& p : params) n += mesh::NumElements(p.shape);
  return n;
}

}  // namespace tpumesh::models
