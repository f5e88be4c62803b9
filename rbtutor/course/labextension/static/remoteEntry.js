// rbtutor-validate: a JupyterLab extension without a build step.
//
// nbgrader's Validate dialog says "Success! Your notebook passes all the tests." whenever no cell
// raised, which a student reads as "my values are right". rbtutor's answer cells only check the
// form of an answer (its type, shape and units); values are judged by the grader after submission.
// This extension rewords that dialog, and when a cell failed it puts the reason first and folds the
// cell's source away. It only rearranges what nbgrader rendered; it sends and stores nothing.
//
// JupyterLab loads a prebuilt extension as a module-federation container registered on
// window._JUPYTERLAB[name] with init() and get(module); this file is that container, by hand.
(function () {
  "use strict";

  var PASSED = "Form checks passed: every answer has the type and shape the problem asks for. " +
    "Whether the values are right is graded after you submit.";
  var ON_HUB = " On the course hub, check(answer_id, value) in a cell tells you now.";
  var FAILED = "This cell needs fixing:";

  // From the last line that names an exception to the end, when lines come before it; else null.
  function lastError(text) {
    var lines = text.replace(/\s+$/, "").split("\n");
    for (var j = lines.length - 1; j > 0; j--) {
      if (/^[A-Za-z_][\w.]*(Error|Exception|Failed)\b/.test(lines[j])) return lines.slice(j).join("\n");
    }
    return null;
  }

  function folded(title, node) {
    var fold = document.createElement("details");
    var summary = document.createElement("summary");
    summary.innerText = title;
    fold.append(summary);
    node.replaceWith(fold);
    fold.append(node);
    return fold;
  }

  function reword(message) {
    if (message.dataset.rbtutor) return;
    message.dataset.rbtutor = "done";
    if (message.classList.contains("validation-success")) {
      var text = message.querySelector("p");
      if (text) text.innerText = PASSED + ON_HUB;
    } else if (message.classList.contains("validation-failed")) {
      // nbgrader renders each failed cell as: <div><p>intro</p></div>, <div>source</div>, <div>error</div>
      var parts = Array.prototype.slice.call(message.children);
      for (var i = 0; i + 2 < parts.length; i += 3) {
        var intro = parts[i], source = parts[i + 1], error = parts[i + 2];
        var label = intro.querySelector("p");
        if (label) label.innerText = FAILED;
        var reason = lastError(error.innerText);
        if (reason) {  // a traceback: its last lines (the exception and the hint) first
          var short = document.createElement("pre");
          short.innerText = reason;
          message.insertBefore(short, source);
          message.insertBefore(folded("The traceback", error), source);
        } else {
          message.insertBefore(error, source);
        }
        folded("The cell", source);  // stays where the source was: after the reason
      }
    }
  }

  function scan(root) {
    if (!root.querySelectorAll) return;
    if (root.id === "validation-message") reword(root);
    root.querySelectorAll("#validation-message").forEach(reword);
  }

  var plugin = {
    id: "rbtutor-validate:plugin",
    description: "The Validate dialog says what it checked and shows the student's problem first.",
    autoStart: true,
    activate: function () {
      new MutationObserver(function (records) {
        records.forEach(function (record) { record.addedNodes.forEach(scan); });
      }).observe(document.body, { childList: true, subtree: true });
    }
  };

  window._JUPYTERLAB = window._JUPYTERLAB || {};
  window._JUPYTERLAB["rbtutor-validate"] = {
    init: function () { return Promise.resolve(); },
    get: function (module) {
      if (module !== "./extension") {
        return Promise.reject(new Error("rbtutor-validate has no module " + module));
      }
      return Promise.resolve(function () { return { __esModule: true, default: plugin }; });
    }
  };
})();
