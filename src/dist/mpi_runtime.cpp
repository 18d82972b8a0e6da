#include "mpi_runtime.h"

#if MIXPREC_HAVE_MPI
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "mixprec/core/error.h"
#include "mixprec/numerics/convert.h"

namespace mixprec::dist::mpi {
namespace {

// Elements widened per step inside a reduction: two f32 blocks on the stack.
constexpr int kChunk = 512;

// Walks two narrow buffers in chunks widened to f32: combine(a, b, src, dst, n) sees in's and
// inout's values (a, b) and their bits (src, dst) for n elements.
template <DType D, class Combine>
void widened_chunks(void* in, void* inout, int len, Combine&& combine) {
  float a[kChunk], b[kChunk];
  const auto* src = static_cast<const uint16_t*>(in);
  auto* dst = static_cast<uint16_t*>(inout);
  for (int done = 0; done < len; done += kChunk) {
    const std::size_t n = static_cast<std::size_t>(std::min(kChunk, len - done));
    widen_row_f32(D, src + done, a, n);
    widen_row_f32(D, dst + done, b, n);
    combine(a, b, src + done, dst + done, n);
  }
}

// Sum of two narrow buffers: inout[i] = round(f32(in[i]) + f32(inout[i])), nearest even.
template <DType D>
void narrow_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  widened_chunks<D>(in, inout, *len,
                    [](const float* a, float* b, const uint16_t*, uint16_t* dst, std::size_t n) {
                      for (std::size_t i = 0; i < n; ++i) b[i] += a[i];
                      narrow_row_f32(b, D, dst, n);
                    });
}

// Max/min of two narrow buffers: picks one operand's bits (no rounding); NaN wins so a
// non-finite value is never hidden.
template <DType D, bool kMax>
void narrow_pick(void* in, void* inout, int* len, MPI_Datatype*) {
  widened_chunks<D>(
      in, inout, *len,
      [](const float* a, const float* b, const uint16_t* src, uint16_t* dst, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i) {
          const bool take_in =
              std::isnan(a[i]) || (!std::isnan(b[i]) && (kMax ? a[i] > b[i] : a[i] < b[i]));
          if (take_in) dst[i] = src[i];
        }
      });
}

struct Runtime {
  bool we_initialized = false;
  MPI_Datatype bf16_type = MPI_DATATYPE_NULL;
  MPI_Datatype f16_type = MPI_DATATYPE_NULL;
  MPI_Op ops[2][3] = {};  // [bf16, f16][sum, max, min]
};

Runtime& runtime() {
  static Runtime r;
  return r;
}

void check(int code, const char* call) {
  if (code != MPI_SUCCESS) throw Error("dist", std::string(call) + ": " + error_string(code));
}

// At exit: free what we made, then finalise if we initialised (never someone else's MPI).
void finalize_at_exit() {
  if (finalized()) return;
  Runtime& r = runtime();
  for (auto& row : r.ops)
    for (MPI_Op& op : row)
      if (op != MPI_OP_NULL) MPI_Op_free(&op);
  if (r.bf16_type != MPI_DATATYPE_NULL) MPI_Type_free(&r.bf16_type);
  if (r.f16_type != MPI_DATATYPE_NULL) MPI_Type_free(&r.f16_type);
  if (r.we_initialized) MPI_Finalize();
}

MPI_Datatype make_2_byte_type() {
  MPI_Datatype t;
  check(MPI_Type_contiguous(2, MPI_BYTE, &t), "MPI_Type_contiguous");
  check(MPI_Type_commit(&t), "MPI_Type_commit");
  return t;
}

MPI_Op make_op(MPI_User_function* fn) {
  MPI_Op op;
  check(MPI_Op_create(fn, /*commute=*/1, &op), "MPI_Op_create");
  return op;
}

void start() {
  int initialized = 0;
  check(MPI_Initialized(&initialized), "MPI_Initialized");
  Runtime& r = runtime();
  if (!initialized) {
    MIXPREC_CHECK(!finalized(), "dist", "MPI was already finalized: it cannot start again");
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    r.we_initialized = true;
    MIXPREC_CHECK(provided >= MPI_THREAD_FUNNELED, "dist",
                  "MPI_Init_thread gave thread level " + std::to_string(provided) +
                      ", below MPI_THREAD_FUNNELED");
  }
  std::atexit(finalize_at_exit);
  r.bf16_type = make_2_byte_type();
  r.f16_type = make_2_byte_type();
  r.ops[0][0] = make_op(narrow_sum<DType::bf16>);
  r.ops[0][1] = make_op(narrow_pick<DType::bf16, true>);
  r.ops[0][2] = make_op(narrow_pick<DType::bf16, false>);
  r.ops[1][0] = make_op(narrow_sum<DType::f16>);
  r.ops[1][1] = make_op(narrow_pick<DType::f16, true>);
  r.ops[1][2] = make_op(narrow_pick<DType::f16, false>);
}

int op_index(ReduceOp op) {
  return op == ReduceOp::sum ? 0 : op == ReduceOp::max ? 1 : 2;
}

}  // namespace

void ensure_initialized() {
  static std::once_flag once;
  std::call_once(once, start);
}

bool finalized() {
  int done = 0;
  MPI_Finalized(&done);
  return done != 0;
}

std::string error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error code " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(length));
}

MPI_Datatype move_type(DType dtype) {
  switch (dtype_size(dtype)) {
    case 1:
      return MPI_BYTE;
    case 2:
      return MPI_UINT16_T;
    case 4:
      return MPI_UINT32_T;
    default:
      return MPI_UINT64_T;
  }
}

MPI_Datatype reduce_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::i64:
      return MPI_INT64_T;
    case DType::bf16:
      return runtime().bf16_type;
    case DType::f16:
      return runtime().f16_type;
    default:
      throw Error("dist", std::string("no MPI reduction for dtype ") + dtype_name(dtype));
  }
}

MPI_Op reduce_op(DType dtype, ReduceOp op) {
  if (dtype == DType::bf16) return runtime().ops[0][op_index(op)];
  if (dtype == DType::f16) return runtime().ops[1][op_index(op)];
  return op == ReduceOp::sum ? MPI_SUM : op == ReduceOp::max ? MPI_MAX : MPI_MIN;
}

}  // namespace mixprec::dist::mpi
#endif
