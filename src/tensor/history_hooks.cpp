// The hooks autograd installs (history_hooks.h).
#include "mixprec/tensor/history_hooks.h"

namespace mixprec::detail {
namespace {

HistoryHooks& hooks() {
  static HistoryHooks h;
  return h;
}

}  // namespace

void install_history_hooks(const HistoryHooks& h) {
  hooks() = h;
}

const HistoryHooks& history_hooks() {
  return hooks();
}

}  // namespace mixprec::detail
