// A command line as one line a user can paste into a shell, for the commands convoy's programs
// print (the command that watches a run, the one that draws a figure later).
#ifndef CONVOY_COMMON_SUPPORT_SHELL_LINE_H_
#define CONVOY_COMMON_SUPPORT_SHELL_LINE_H_

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"

namespace convoy {

// `argv` joined by spaces; an argument with a character a shell would read (or an empty one) is
// single-quoted.
inline std::string ShellLine(const std::vector<std::string>& argv) {
  std::vector<std::string> words;
  for (const std::string& a : argv) {
    const bool plain = !a.empty() && std::all_of(a.begin(), a.end(), [](char c) {
      return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
             absl::string_view("_-./=:,+@%").find(c) != absl::string_view::npos;
    });
    words.push_back(plain ? a : absl::StrCat("'", absl::StrReplaceAll(a, {{"'", "'\\''"}}), "'"));
  }
  return absl::StrJoin(words, " ");
}

}  // namespace convoy

#endif  // CONVOY_COMMON_SUPPORT_SHELL_LINE_H_
