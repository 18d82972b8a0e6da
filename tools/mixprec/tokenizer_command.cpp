// `mixprec tokenizer train`: a sentencepiece model from a corpus (files, folders, JSONL), as
// `[model] tokenizer = PATH` then loads it.
#include "tokenizer_command.h"

#include <fmt/core.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "mixprec/core/error.h"
#include "mixprec/data/corpus.h"
#include "mixprec/data/documents.h"
#include "mixprec/data/sentencepiece_tokenizer.h"
#include "tokenizer_text_command.h"
#include "training_lines.h"
#include "usage_error.h"

namespace mixprec::cli {
namespace {

namespace fs = std::filesystem;

struct TrainArgs {
  std::string data;  // "" = the default corpus
  std::string output;
  bool overwrite = false;
  data::SentencepieceTraining options;
};

// The corpus's documents as lines of a temporary text file (sentencepiece reads lines), which
// is removed at scope exit; `lines` counts what sentencepiece will train on.
class DocumentsFile {
 public:
  DocumentsFile(const std::string& data, TrainingLines& lines) {
    data::CorpusSpec spec = data.empty() ? data::default_corpus() : data::CorpusSpec{{data}, {}};
    std::string pattern = (fs::temp_directory_path() / "mixprec-tokenizer-XXXXXX").string();
    const int fd = ::mkstemp(pattern.data());
    MIXPREC_CHECK(fd >= 0, "tokenizer train", "cannot create a temporary file");
    ::close(fd);
    path_ = pattern;
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    data::for_each_document(
        data::list_corpus_files(spec),
        [&](const std::string& w) {
          fmt::print(stderr, "warning: {}\n", w);
          lines.add_skipped_file(w);
        },
        [&](std::string_view doc, const data::DocumentPlace& place) {
          lines.add_document(doc, place);
          out << doc;
          if (!doc.empty() && doc.back() != '\n') out << '\n';
        });
    MIXPREC_CHECK(out.good(), "tokenizer train", "cannot write " + path_.string());
  }
  ~DocumentsFile() {
    std::error_code ignored;
    fs::remove(path_, ignored);
  }
  DocumentsFile(const DocumentsFile&) = delete;
  DocumentsFile& operator=(const DocumentsFile&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void run_train(TrainArgs a) {
  if (!a.data.empty() && !fs::exists(a.data))
    throw UsageError("--data '" + a.data + "' does not exist");
  // Checked first: training takes minutes, and a model trained runs and token caches depend on
  // is not replaced by accident.
  std::error_code ec;
  if (!a.overwrite && fs::exists(fs::symlink_status(a.output, ec)))
    throw UsageError("--output '" + a.output + "' already exists (pass --overwrite to replace it)");
  TrainingLines lines(data::kSentencepieceMaxLineBytes);
  const DocumentsFile text(a.data, lines);
  lines.require_usable(a.data.empty() ? "the default corpus" : "--data '" + a.data + "'");
  if (const auto left_out = lines.left_out()) fmt::print(stderr, "warning: {}\n", *left_out);
  a.options.files = {text.path().string()};
  a.options.output = a.output;
  data::train_sentencepiece(a.options);
  const auto tokenizer = data::open_sentencepiece(a.output);
  fmt::print("wrote {}: {}\nuse it with [model] tokenizer = \"{}\" and vocab_size = {}\n", a.output,
             tokenizer->describe(), a.output, tokenizer->vocab_size());
}

}  // namespace

void add_tokenizer_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "tokenizer", "Subword tokenizers: train a sentencepiece model; encode and decode text");
  cmd->require_subcommand(1);
  auto args = std::make_shared<TrainArgs>();
  CLI::App* train = cmd->add_subcommand(
      "train", "Train a sentencepiece model on a corpus (text files, folders, JSONL)");
  train->add_option("--data", args->data,
                    "a text file, folder or JSONL file (default: the fortunes corpus)");
  train->add_option("--output,-o", args->output, "the model to write, PATH.model")->required();
  train->add_flag("--overwrite", args->overwrite, "replace the model at --output if it exists");
  train->add_option("--vocab-size", args->options.vocab_size, "ids in the vocabulary")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{8}, int64_t{1} << 24));
  train->add_option("--model-type", args->options.model_type, "bpe or unigram")
      ->capture_default_str()
      ->check(CLI::IsMember({"bpe", "unigram"}));
  train
      ->add_option("--max-sentences", args->options.max_sentences,
                   "lines sampled for training (sentencepiece's input_sentence_size)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  train->footer(
      "\nByte fallback is on (Llama's choice): text outside the pieces encodes as <0xNN> bytes.\n"
      "Example:\n"
      "  mixprec tokenizer train --vocab-size 2048 -o outputs/fortunes-2k.model\n"
      "  mixprec train configs/llama3_debug.toml --set "
      "model.tokenizer='\"outputs/fortunes-2k.model\"'"
      " --set model.vocab_size=2048");
  train->callback([args, &exit_code] {
    run_train(*args);
    exit_code = 0;
  });
  add_tokenizer_text_commands(*cmd, exit_code);
}

}  // namespace mixprec::cli
