// Reads the Prometheus text exposition format into samples, so that tests
// assert on series values rather than on line layout (prometheus-cpp orders
// series by hash, not by insertion).
#ifndef SPECVERIFY_TESTS_METRICS_EXPOSITION_PARSER_H_
#define SPECVERIFY_TESTS_METRICS_EXPOSITION_PARSER_H_

#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace specverify::testing {

using LabelSet = std::map<std::string, std::string>;

struct Sample {
  std::string name;
  LabelSet labels;
  std::string value_text;
  double value = 0;
};

// Parses `name{k="v",...} value` lines; comments and blank lines are skipped.
// Label values may contain \" and \\ escapes.
inline std::vector<Sample> ParseExposition(const std::string& text) {
  std::vector<Sample> samples;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    Sample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') s.name += line[i++];
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        std::string key;
        while (i < line.size() && line[i] != '=') key += line[i++];
        i += 2;  // ="
        std::string value;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\' && i + 1 < line.size()) ++i;
          value += line[i++];
        }
        ++i;  // closing quote
        if (i < line.size() && line[i] == ',') ++i;
        s.labels[key] = value;
      }
      ++i;  // }
    }
    while (i < line.size() && line[i] == ' ') ++i;
    s.value_text = line.substr(i, line.find(' ', i) - i);
    s.value = std::strtod(s.value_text.c_str(), nullptr);
    samples.push_back(std::move(s));
  }
  return samples;
}

// The value of the one sample with exactly this name and label set.
inline std::optional<double> FindSample(const std::vector<Sample>& samples,
                                        const std::string& name, const LabelSet& labels = {}) {
  for (const Sample& s : samples) {
    if (s.name == name && s.labels == labels) return s.value;
  }
  return std::nullopt;
}

// Every sample of a metric name, whatever its labels.
inline std::vector<Sample> SamplesNamed(const std::vector<Sample>& samples,
                                        const std::string& name) {
  std::vector<Sample> out;
  for (const Sample& s : samples) {
    if (s.name == name) out.push_back(s);
  }
  return out;
}

}  // namespace specverify::testing

#endif  // SPECVERIFY_TESTS_METRICS_EXPOSITION_PARSER_H_
