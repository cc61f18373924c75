package rules

import (
	"errors"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
)

// FileSummary is what CheckFile found in a valid rule file.
type FileSummary struct {
	Groups, Recording, Alerting int
}

// CheckFile validates a rule file as `promtool check rules` does, with the
// upstream rule-file parser: the YAML and its fields (an unknown field is
// an error), group and rule names, duplicate groups, every expression and
// every label and annotation template. Each error starts with the file
// and, where the parser gives it, the line and column
// ("f.yml: 7:15: group "g", rule 1, "r": ...").
func CheckFile(path string) (FileSummary, []error) {
	var sum FileSummary
	rgs, errs := rulefmt.ParseFile(path, false, model.UTF8Validation)
	if len(errs) > 0 {
		return sum, errs
	}
	for _, g := range rgs.Groups {
		sum.Groups++
		for _, r := range g.Rules {
			if r.Alert != "" {
				sum.Alerting++
			} else {
				sum.Recording++
			}
		}
	}
	return sum, nil
}

// CheckFiles validates every file with CheckFile and joins the errors.
func CheckFiles(paths ...string) error {
	var all []error
	for _, p := range paths {
		_, errs := CheckFile(p)
		all = append(all, errs...)
	}
	return errors.Join(all...)
}
