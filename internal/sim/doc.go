// Package sim is a seeded simulation of the whole delivery path: Pub/Sub
// redelivering each message until it is acknowledged, one or more service
// instances answering through push, CloudEvents and pull, and handlers and a
// store that fail, stall or crash. After every answer and at the end it checks
// the guarantee's rules. [Run] runs one [Scenario] on one [Backend];
// [RunPipeline] runs a [PipeScenario] on a [PipeBackend]. The model, the
// families and every rule with its exceptions: docs/testing.md, "Model and rules".
package sim
