//! Ask-and-tell runs the same steps as `run_study`: with the same sampler, seed and told
//! metrics it proposes the same trials, in the same order, with the same values; it stops
//! proposing when brute force has visited every point; and `tell` refuses what does not fit.

mod common;
use common::*;
use mase_search::objective::{MetricSpec, Objective};
use mase_search::runner::RunContext;
use mase_search::{
    build_sampler, run_study, AskTell, AskTellParts, Direction, MemoryStorage, OpenMode, ParamDef, ParamKind, Runner, SearchError,
    SearchSpace, Silent, Told, TrialState,
};
use serde_json::Value;

/// A 7 x 7 x 7 grid whose quadratic has its minimum at (5, 1, 3).
fn grid() -> PointGrid {
    PointGrid(Grid { params: (0..3).map(|i| ParamDef::new(format!("x{i}"), ParamKind::Index { choices: 7 })).collect() })
}

fn quadratic() -> QuadraticRunner {
    QuadraticRunner { target: vec![5.0, 1.0, 3.0] }
}

fn objective() -> Objective {
    Objective::new(vec![MetricSpec { name: "f".into(), scale: 1.0, direction: Direction::Minimize }], None, vec![])
}

fn parts(sampler: &str, seed: u64) -> AskTellParts {
    AskTellParts {
        name: "s".into(),
        space: Box::new(grid()),
        sampler: build_sampler(sampler, &Value::Null).unwrap(),
        objective: objective(),
        seed,
    }
}

#[test]
fn ask_tell_gives_the_trials_of_run_study() {
    // (sampler, seed, trials): TPE past its 10 random start-up trials, NSGA-II, random, QMC.
    let cases = [("tpe", 3, 16), ("tpe", 4, 16), ("random", 1, 8), ("nsgaii", 2, 8), ("qmc", 5, 8)];
    for (sampler, seed, n) in cases {
        let space = grid();
        let s = build_sampler(sampler, &Value::Null).unwrap();
        let obj = objective();
        let runners: Vec<Box<dyn Runner>> = vec![Box::new(quadratic())];
        let setup = one_thread_setup("s", &space, s.as_ref(), &obj, &runners, n, seed);
        let looped = run_study(&setup, &mut MemoryStorage::new(), OpenMode::Fresh, &Silent).unwrap().trials;

        let mut study = AskTell::open(parts(sampler, seed), Box::new(MemoryStorage::new()), OpenMode::Fresh).unwrap();
        let runner = quadratic();
        for _ in 0..n {
            let trial = study.ask().unwrap().expect("a point");
            let mut cand = grid().build(&trial.config).unwrap();
            let metrics = runner.run(&mut cand, &RunContext { threads: 1, trial: trial.number }).unwrap();
            study.tell(trial.number, Told::Metrics(metrics, Default::default())).unwrap();
        }
        let told = study.trials().unwrap();
        let key = |t: &mase_search::TrialRecord| (t.number, t.point.clone(), t.values.clone(), t.state);
        assert_eq!(told.iter().map(key).collect::<Vec<_>>(), looped.iter().map(key).collect::<Vec<_>>(), "{sampler} seed {seed}");
    }
}

#[test]
fn brute_force_stops_after_every_point() {
    let mut study = AskTell::open(parts("brute", 0), Box::new(MemoryStorage::new()), OpenMode::Fresh).unwrap();
    let mut points = Vec::new();
    while let Some(t) = study.ask().unwrap() {
        points.push(t.point.clone());
        study.tell(t.number, Told::Values(vec![t.point.iter().sum()])).unwrap();
    }
    assert_eq!(points.len(), 343);
    assert!(study.is_exhausted());
    points.sort_by(|a, b| a.partial_cmp(b).unwrap());
    points.dedup();
    assert_eq!(points.len(), 343, "each point once");
    let best = study.best_trials().unwrap();
    assert_eq!(best.iter().map(|t| t.point.clone()).collect::<Vec<_>>(), [vec![0.0, 0.0, 0.0]]);
}

#[test]
fn tell_refuses_what_does_not_fit() {
    let mut study = AskTell::open(parts("random", 0), Box::new(MemoryStorage::new()), OpenMode::Fresh).unwrap();
    let t = study.ask().unwrap().unwrap();
    let cases: [(u64, Told, &str); 3] = [
        (t.number, Told::Values(vec![1.0, 2.0]), "study `s`: told 2 value(s), the objective has 1 (f)"),
        (t.number, Told::Values(vec![f64::NAN]), "study `s`: told the value NaN; values must be finite"),
        (7, Told::Values(vec![1.0]), "study `s`: no trial 7 (ask for trials with ask())"),
    ];
    for (number, told, want) in cases {
        assert_eq!(study.tell(number, told).unwrap_err().to_string(), want);
    }
    // A metric the objective needs and was not told fails the trial, as in run_study.
    let failed = study.tell(t.number, Told::Metrics(Default::default(), Default::default())).unwrap();
    assert_eq!(failed.state, TrialState::Fail);
    assert!(failed.error.as_deref().unwrap_or("").contains("metric `f`"), "{failed:?}");
    let again = study.tell(t.number, Told::Values(vec![1.0])).unwrap_err();
    assert!(matches!(again, SearchError::NotRunning { trial: 0, .. }), "{again}");
}
