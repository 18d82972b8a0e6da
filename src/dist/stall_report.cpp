#include "stall_report.h"

namespace mixprec::dist::detail {
namespace {

std::string point_name(const WaitPoint& p) {
  return p.kind + " #" + std::to_string(p.number);
}

std::string when(int64_t steps_done) {
  return steps_done < 0 ? "before the first training step"
                        : "after step " + std::to_string(steps_done);
}

// "rank 1" / "ranks 1, 3", and the verb to go with it.
std::string ranks_text(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

const char* is_are(const std::vector<int>& ranks) {
  return ranks.size() == 1 ? "is" : "are";
}

}  // namespace

std::string describe_stall(const Stall& s) {
  const std::string here = point_name(s.mine);
  std::vector<int> silent, with_me;
  std::string elsewhere;
  for (std::size_t r = 0; r < s.answers.size(); ++r) {
    const int rank = static_cast<int>(r);
    const std::optional<WaitPoint>& a = s.answers[r];
    if (rank == s.rank) {
      with_me.push_back(rank);
    } else if (!a) {
      silent.push_back(rank);
    } else if (a->kind == s.mine.kind && a->number == s.mine.number) {
      with_me.push_back(rank);
    } else {
      // The same number in another kind: the ranks' programs called different collectives.
      const bool mismatch = a->number == s.mine.number;
      elsewhere += "; rank " + std::to_string(rank) + " is waiting in " + point_name(*a) + " (" +
                   when(a->steps_done) + ")" +
                   (mismatch ? ", not " + here + ": the ranks called different collectives" : "");
    }
  }
  const std::string limit = std::to_string(s.waited_seconds) + " s (" + s.timeout_key + "; " +
                            when(s.mine.steps_done) + ")";
  std::string out;
  if (!silent.empty()) {
    out = ranks_text(silent) + " did not reach " + here + " within " + limit + " and " +
          (silent.size() == 1 ? "does" : "do") +
          " not answer (stopped, hung, or busy outside any collective)";
  } else {
    out = here + " did not complete within " + limit + " although every rank answered";
  }
  out += "; " + ranks_text(with_me) + " " + is_are(with_me) + " waiting in " + here;
  return out + elsewhere;
}

}  // namespace mixprec::dist::detail
