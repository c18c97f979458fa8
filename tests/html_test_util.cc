#include "html_test_util.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace headroom::testing {

namespace fs = std::filesystem;

std::vector<Attrs> elements(const std::string& html, const std::string& element, const std::string& cls) {
  std::vector<Attrs> out;
  std::string open = "<" + element + " ";
  for (size_t pos = html.find(open); pos != std::string::npos; pos = html.find(open, pos + 1)) {
    size_t end = html.find('>', pos);
    std::string tag = html.substr(pos + open.size(), end - pos - open.size());
    Attrs a;
    size_t i = 0;
    while (i < tag.size()) {
      while (i < tag.size() && tag[i] == ' ') ++i;
      size_t eq = tag.find("=\"", i);
      if (eq == std::string::npos) break;
      std::string key = tag.substr(i, eq - i);
      size_t close = tag.find('"', eq + 2);
      std::string value = tag.substr(eq + 2, close - eq - 2);
      for (auto [from, to] : {std::pair<std::string, std::string>{"&quot;", "\""}, {"&amp;", "&"}}) {
        for (size_t k = value.find(from); k != std::string::npos; k = value.find(from, k + 1)) value.replace(k, from.size(), to);
      }
      a[key] = value;
      i = close + 1;
    }
    if (a["class"] == cls) out.push_back(a);
  }
  return out;
}

std::vector<double> numbers(const std::string& text) {
  std::vector<double> v;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) v.push_back(std::stod(cur));
    cur.clear();
  };
  for (char c : text) {
    if ((c >= '0' && c <= '9') || c == '.' || c == '-') {
      cur += c;
    } else {
      flush();
    }
  }
  flush();
  return v;
}

std::vector<int64_t> int_list(const std::string& text) {
  std::vector<int64_t> v;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(std::stoll(item));
  return v;
}


std::string artifact_dir() {
#ifdef HEADROOM_BINARY_DIR
  std::string dir = std::string(HEADROOM_BINARY_DIR) + "/test-artifacts";
#else
  std::string dir = fs::path(HEADROOM_CLI).parent_path().string() + "/test-artifacts";
#endif
  fs::create_directories(dir);
  return dir;
}

std::string find_chromium() {
  if (const char* env = std::getenv("HEADROOM_CHROMIUM"); env && *env) return env;
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    for (const char* name : {"chromium", "chromium-browser"}) {
      std::string p = dir + "/" + name;
      if (access(p.c_str(), X_OK) == 0) return p;
    }
  }
  return "";
}

// Width and height from a PNG's IHDR chunk (0, 0 when the file is not a PNG).
std::pair<uint32_t, uint32_t> png_size(const std::string& bytes) {
  static const char kSig[] = "\x89PNG\r\n\x1a\n";
  if (bytes.size() < 24 || bytes.compare(0, 8, std::string(kSig, 8)) != 0) return {0, 0};
  auto be32 = [&](size_t at) {
    return (static_cast<uint32_t>(static_cast<unsigned char>(bytes[at])) << 24) |
           (static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + 1])) << 16) |
           (static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + 2])) << 8) |
           static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + 3]));
  };
  return {be32(16), be32(20)};
}

namespace {

// The harness's measuring script (runs in the harness, reads the framed page's DOM).
constexpr const char* kMeasure = R"JS(
addEventListener('load', () => {
  const out = [];
  const d = document.getElementById('page').contentDocument;
  const root = d.documentElement;
  if (root.scrollWidth > root.clientWidth + 0.5)
    out.push('horizontal scroll: the page is ' + root.scrollWidth + ' px wide in a ' + root.clientWidth + ' px viewport');
  const short = s => { s = s.replace(/\s+/g, ' ').trim(); return JSON.stringify(s.length > 40 ? s.slice(0, 40) + '...' : s); };
  const boxes = [];
  for (const t of d.querySelectorAll('svg text')) {
    const r = t.getBoundingClientRect();
    if (r.width > 0 && r.height > 0) boxes.push({r, text: t.textContent, node: t, svg: true});
  }
  const walker = d.createTreeWalker(d.body, NodeFilter.SHOW_TEXT);
  const range = d.createRange();
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (!n.data.trim() || n.parentElement.closest('svg')) continue;
    range.selectNodeContents(n);
    const rects = [...range.getClientRects()].filter(r => r.width > 0.5 && r.height > 0.5);
    for (const r of rects) boxes.push({r, text: n.data, node: n, svg: false});
    const tops = new Set(rects.map(r => Math.round(r.top)));
    if (tops.size < 2) continue;
    // Where the node wraps: the first character of each new line.
    let prev = null;
    for (let i = 0; i < n.data.length; ++i) {
      range.setStart(n, i); range.setEnd(n, i + 1);
      const cr = range.getClientRects();
      if (!cr.length || cr[0].width === 0) continue;
      const top = cr[0].top;
      if (prev !== null && top > prev + 2) {
        const a = n.data[i - 1], b = n.data[i];
        if (!/\s/.test(a) && !/\s/.test(b) && a !== '-' && a !== '/')
          out.push('mid-word break: ' + short(n.data) + ' wraps between ' + JSON.stringify(a) + ' and ' + JSON.stringify(b));
      }
      prev = top;
    }
  }
  boxes.sort((p, q) => p.r.top - q.r.top);
  for (let i = 0; i < boxes.length; ++i) {
    const a = boxes[i].r;
    for (let j = i + 1; j < boxes.length && boxes[j].r.top < a.bottom - 1; ++j) {
      if (boxes[j].node === boxes[i].node) continue;
      const b = boxes[j].r;
      const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > 1 && h > 1)
        out.push('overlapping text: ' + short(boxes[i].text) + ' and ' + short(boxes[j].text) + ' share ' + w.toFixed(1) + ' x ' + h.toFixed(1) + ' px');
    }
  }
  for (const l of d.querySelectorAll('svg line[class]')) {
    const lr = l.getBoundingClientRect();
    if (lr.height > 0.5) continue;  // horizontal lines only
    for (const b of boxes) {
      if (!b.svg) continue;
      const r = b.r;
      if (r.left < lr.right - 1 && r.right > lr.left + 1 && r.top < lr.top && r.bottom > lr.top)
        out.push('label over a line: ' + short(b.text) + ' crosses the ' + l.getAttribute('class') + ' line');
    }
  }
  out.push('measured ' + boxes.length + ' text boxes');
  const pre = document.createElement('pre');
  pre.id = 'layout';
  pre.textContent = out.join('\n');
  document.body.appendChild(pre);
});
)JS";

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::string unescape_html(std::string s) {
  for (auto [from, to] : {std::pair<std::string, std::string>{"&quot;", "\""}, {"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"}}) {
    for (size_t k = s.find(from); k != std::string::npos; k = s.find(from, k + to.size())) s.replace(k, from.size(), to);
  }
  return s;
}

}  // namespace

std::vector<std::string> layout_problems(const std::string& html, int width, const std::string& png) {
  std::vector<std::string> problems;
  std::string chromium = find_chromium();
  EXPECT_FALSE(chromium.empty()) << "Chromium is not installed: install it with `scripts/install-deps.sh browser`, or point "
                                    "HEADROOM_CHROMIUM at the binary.";
  if (chromium.empty()) return {"no chromium"};
  const fs::path page = fs::absolute(html);
  const std::string harness = png + ".harness.html";
  {
    std::ofstream h(harness);
    h << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><style>body{margin:0}iframe{border:0;display:block}</style></head>"
         "<body><iframe id=\"page\" src=\"file://" << page.string() << "\" style=\"width:" << width
      << "px;height:2000px\"></iframe>\n<script>" << kMeasure << "</script></body></html>\n";
  }
  const std::string log = png + ".log", dom = png + ".dom.html";
  fs::remove(png);
  char profile[] = "/tmp/headroom-chromium-XXXXXX";
  EXPECT_NE(mkdtemp(profile), nullptr);
  std::string cmd = "timeout 120 " + chromium +
                    " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --allow-file-access-from-files"
                    " --disable-background-networking --disable-component-update --disable-sync --hide-scrollbars"
                    " --user-data-dir=" + std::string(profile) + " --screenshot=" + png + " --window-size=" +
                    std::to_string(width) + ",2000 --enable-logging=stderr --v=0 --dump-dom file://" +
                    fs::absolute(harness).string() + " >" + dom + " 2>" + log;
  int status = std::system(cmd.c_str());
  fs::remove_all(profile);
  std::string err = read_all(log);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "chromium failed:\n" << err;
  std::stringstream ls(err);
  for (std::string line; std::getline(ls, line);) EXPECT_EQ(line.find(":CONSOLE"), std::string::npos) << line;
  auto [w, h] = png_size(read_all(png));
  EXPECT_EQ(w, static_cast<uint32_t>(width)) << png;
  EXPECT_EQ(h, 2000u) << png;

  std::string out = read_all(dom);
  const std::string open = "<pre id=\"layout\">";
  size_t a = out.find(open), b = out.find("</pre>", a);
  if (a == std::string::npos || b == std::string::npos) return {"the harness wrote no measurement (see " + dom + ")"};
  std::stringstream ss(unescape_html(out.substr(a + open.size(), b - a - open.size())));
  bool measured = false;
  for (std::string line; std::getline(ss, line);) {
    if (line.rfind("measured ", 0) == 0) {
      measured = line != "measured 0 text boxes";
      continue;
    }
    problems.push_back(line);
  }
  if (!measured) problems.push_back("no text measured: the page did not render");
  return problems;
}

void expect_clean_layout(const std::string& html, const std::string& stem) {
  const std::string dir = fs::path(html).parent_path().string();
  for (int width : kLayoutWidths) {
    const std::string png = (dir.empty() ? std::string(".") : dir) + "/" + stem + "-" + std::to_string(width) + ".png";
    for (const std::string& p : layout_problems(html, width, png)) ADD_FAILURE() << width << " px: " << p;
  }
}

}  // namespace headroom::testing
