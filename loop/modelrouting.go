package loop

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/theloop-dev/theloop/graph"
)

// Model tiers (the-loop's tokenEconomy.modelRouting): a stage of the
// lifecycle names a tier (economy, standard, frontier), a tier names a
// model, and a work item's risk tier may raise the stage's tier to a
// floor. theloop makes one model call of its own — `loopctl critic run`,
// a one-shot harness run at a critic node — and a critic that names no
// model gets the tier's model for its harness. The agent's session is
// not routed: its harness and model are the operator's (routing).
//
//	tokenEconomy:
//	  modelRouting:
//	    tiers:
//	      economy:  {model: haiku}                       # every harness
//	      frontier: {claude: opus, codex: gpt-5-codex}   # per harness
//	    stages: {critic-review: frontier, evidence: economy}
//	    riskTierFloor: {"4": standard, "5": frontier}

// ModelTiers are the tier names, cheapest first (a floor raises, never
// lowers).
var ModelTiers = []string{"economy", "standard", "frontier"}

// ModelRouting is tokenEconomy.modelRouting as theloop reads it.
type ModelRouting struct {
	// Enabled: tokenEconomy.enabled and modelRouting.enabled (both default
	// true when the block is present).
	Enabled bool
	// Tiers maps a tier to its model per harness ("" key: every harness).
	Tiers map[string]map[string]string
	// Stages maps a stage to its tier.
	Stages map[string]string
	// Floors maps a risk tier to the least model tier it gets.
	Floors map[int]string
}

// ReadModelRouting reads tokenEconomy.modelRouting from the harness
// config; a bad entry is left out with a warning naming it and the fix.
func ReadModelRouting(h HarnessConfig) (ModelRouting, []string) {
	te := graph.AsValues(h.Raw["tokenEconomy"])
	mr := te.Map("modelRouting")
	if te == nil || mr == nil {
		return ModelRouting{}, nil
	}
	file := h.Path
	if file == "" {
		file = HarnessConfigFile
	}
	on := func(v graph.Values) bool { b := v.BoolPtr("enabled"); return b == nil || *b }
	out := ModelRouting{Enabled: on(te) && on(mr), Tiers: map[string]map[string]string{}, Stages: map[string]string{}, Floors: map[int]string{}}
	var warns []string
	where := file + ": tokenEconomy.modelRouting."
	tierName := func(key, v string) bool {
		if slices.Contains(ModelTiers, v) {
			return true
		}
		warns = append(warns, fmt.Sprintf("%s%s: %q is not a tier; use one of %s", where, key, v, strings.Join(ModelTiers, ", ")))
		return false
	}
	for _, tier := range sortedKeys(mr.Map("tiers")) {
		if !tierName("tiers", tier) {
			continue
		}
		models := map[string]string{}
		for _, k := range sortedKeys(mr.Map("tiers").Map(tier)) {
			m := mr.Map("tiers").Map(tier).String(k)
			harness := k
			if k == "model" {
				harness = ""
			} else if !slices.Contains(CriticHarnesses(), k) {
				warns = append(warns, fmt.Sprintf("%stiers.%s.%s: name a harness (%s) or model (every harness)", where, tier, k, strings.Join(CriticHarnesses(), ", ")))
				continue
			}
			if m == "" || strings.HasPrefix(m, "-") || strings.ContainsAny(m, " \t\n\x00") {
				warns = append(warns, fmt.Sprintf("%stiers.%s.%s %q is not a model name", where, tier, k, m))
				continue
			}
			models[harness] = m
		}
		out.Tiers[tier] = models
	}
	for _, stage := range sortedKeys(mr.Map("stages")) {
		if t := mr.Map("stages").String(stage); tierName("stages."+stage, t) {
			out.Stages[stage] = t
		}
	}
	for _, k := range sortedKeys(mr.Map("riskTierFloor")) {
		n, err := strconv.Atoi(k)
		if err != nil || n < 1 || n > 5 {
			warns = append(warns, fmt.Sprintf("%sriskTierFloor.%s: a risk tier is 1 to 5", where, k))
			continue
		}
		if t := mr.Map("riskTierFloor").String(k); tierName("riskTierFloor."+k, t) {
			out.Floors[n] = t
		}
	}
	return out, warns
}

func sortedKeys(v graph.Values) []string {
	out := make([]string, 0, len(v))
	for k := range v {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// nodeStages are the shipped graphs' stages where a node's id is not its
// stage (the-loop's naming; a node's own stage: key wins).
var nodeStages = map[string]string{
	"brainstorming": "brainstorm", "requirements-definition": "requirements", "design-critic-review": "critic-review", "tasks-breakdown": "tasks",
}

// NodeStage is the stage a node's model calls are routed by: its stage:
// key, else the shipped name for its id, else its id.
func NodeStage(n graph.Node) string {
	if n.Stage != "" {
		return n.Stage
	}
	if s, ok := nodeStages[n.ID]; ok {
		return s
	}
	return n.ID
}

// Model is the model for a call at stage by harness for a work item of
// riskTier, the tier it came from, and why ("" model: no routing applies
// — disabled, the stage routed nowhere, or the tier names no model for
// the harness; why says which).
func (m ModelRouting) Model(stage, harness string, riskTier int) (model, tier, why string) {
	if !m.Enabled {
		return "", "", "tokenEconomy.modelRouting is off or absent"
	}
	tier = m.Stages[stage]
	for rt := 1; rt <= riskTier; rt++ {
		if f, ok := m.Floors[rt]; ok && slices.Index(ModelTiers, f) > slices.Index(ModelTiers, tier) {
			tier = f
		}
	}
	if tier == "" {
		return "", "", fmt.Sprintf("tokenEconomy.modelRouting.stages names no tier for stage %s", stage)
	}
	if mod := m.Tiers[tier][harness]; mod != "" {
		return mod, tier, ""
	}
	if mod := m.Tiers[tier][""]; mod != "" {
		return mod, tier, ""
	}
	return "", tier, fmt.Sprintf("tier %s names no model for %s (tokenEconomy.modelRouting.tiers.%s.%s or .model)", tier, harness, tier, harness)
}

// LoadModelRouting reads tokenEconomy from the repository's harness config
// h was loaded from. The block is read here, not with the rest of the
// file: only `loopctl critic run` needs it, and the Stop hook parses the
// harness config on every claim (topLevelBlocks keeps it to the keys that
// path reads).
func LoadModelRouting(repoRoot string, h HarnessConfig) (ModelRouting, []string) {
	if !h.Present || h.Path == "" {
		return ModelRouting{}, nil
	}
	data, exists, err := readConfigFile(filepath.Join(repoRoot, filepath.FromSlash(h.Path)))
	if !exists || err != nil {
		return ModelRouting{}, nil // LoadHarnessConfig said so already
	}
	part, ok := topLevelBlocks(data, map[string]bool{"tokenEconomy": true})
	if !ok {
		part = data
	}
	raw, err := decodeYAMLMap(h.Path, part)
	if err != nil {
		return ModelRouting{}, []string{fmt.Sprintf("%s: tokenEconomy could not be read (%v); no model routing", h.Path, err)}
	}
	return ReadModelRouting(HarnessConfig{Present: true, Path: h.Path, Raw: raw})
}

// RiskTier is work item id's risk tier as its specification's front matter
// gives it (riskTier; 3 when none says).
func (r *Repo) RiskTier(id string) int {
	items := &fileItems{repoRoot: r.Root, specRoot: r.SpecDir}
	wi, _, err := items.Resolve(context.Background(), id)
	if err != nil || wi.RiskTier < 1 {
		return 3
	}
	return wi.RiskTier
}
